package schema

import (
	"math/big"
	"math/bits"
)

// decimal is a JSON number read in place, without allocating: the digits
// before and after the point as written and the written exponent. The
// schema library compares numbers as exact rationals; every JSON number is
// a finite decimal, so comparing digit strings gives the same answers.
type decimal struct {
	negative bool
	// integer and fraction are the digits before and after the point.
	integer, fraction string
	// first and significant locate the significant digits (no leading or
	// trailing zeros) in integer+fraction: first is the index of the
	// first, significant their count, 0 when the value is zero.
	first, significant int
	// point is where the decimal point falls relative to the first
	// significant digit: the value is 0.d1d2…dn × 10^point.
	point int
}

// maxExponent bounds the exponents read. The schema library reads a
// number with big.Rat.SetString, which refuses a non-zero number whose
// exponent, less the digits after the point, is beyond ±1e6 (the library
// then finds it no integer, equal to nothing, and cannot compare it). Such
// numbers get no ruling here, so the library's answer stands.
const (
	maxExponent    = 1 << 20
	maxRatExponent = 1_000_000
)

// parseDecimal reads s, which must be an RFC 8259 number; ok is false for
// anything else, for exponents beyond maxExponent and for the numbers
// big.Rat does not read (see maxRatExponent).
func parseDecimal(s string) (d decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.negative = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	d.integer = s[start:i]
	if len(d.integer) == 0 || (len(d.integer) > 1 && d.integer[0] == '0') {
		return d, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		d.fraction = s[start:i]
		if len(d.fraction) == 0 {
			return d, false
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		var good bool
		if exp, i, good = parseExponent(s, i+1); !good {
			return d, false
		}
	}
	if i != len(s) {
		return d, false
	}
	d.normalize(exp)
	if e := exp - len(d.fraction); !d.isZero() && (e > maxRatExponent || e < -maxRatExponent) {
		return d, false
	}
	return d, true
}

// parseExponent reads an exponent's optional sign and digits from s[i:].
func parseExponent(s string, i int) (exp, next int, ok bool) {
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		if exp = exp*10 + int(s[i]-'0'); exp > maxExponent {
			return 0, i, false
		}
		i++
	}
	if i == start {
		return 0, i, false
	}
	if neg {
		exp = -exp
	}
	return exp, i, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *decimal) normalize(exp int) {
	all := len(d.integer) + len(d.fraction)
	lead := 0
	for lead < all && d.digit(lead) == '0' {
		lead++
	}
	end := all
	for end > lead && d.digit(end-1) == '0' {
		end--
	}
	d.first, d.significant = lead, end-lead
	d.point = len(d.integer) - lead + exp
}

// digit returns the i-th digit of integer+fraction.
func (d *decimal) digit(i int) byte {
	if i < len(d.integer) {
		return d.integer[i]
	}
	return d.fraction[i-len(d.integer)]
}

// significantDigit returns the i-th significant digit.
func (d *decimal) significantDigit(i int) byte { return d.digit(d.first + i) }

func (d *decimal) isZero() bool { return d.significant == 0 }

// isInt reports whether the value has no fractional part.
func (d *decimal) isInt() bool { return d.significant <= d.point }

// cmp compares the values of a and b: -1, 0 or +1.
func (a *decimal) cmp(b *decimal) int {
	switch {
	case a.isZero() && b.isZero():
		return 0
	case a.isZero():
		return signOf(!b.negative) * -1
	case b.isZero():
		return signOf(!a.negative)
	case a.negative != b.negative:
		return signOf(b.negative)
	}
	m := a.cmpAbs(b)
	if a.negative {
		return -m
	}
	return m
}

// signOf is +1 for true and -1 for false.
func signOf(pos bool) int {
	if pos {
		return 1
	}
	return -1
}

// cmpAbs compares the magnitudes of two non-zero values.
func (a *decimal) cmpAbs(b *decimal) int {
	if a.point != b.point {
		return signOf(a.point > b.point)
	}
	for i := 0; i < a.significant && i < b.significant; i++ {
		if x, y := a.significantDigit(i), b.significantDigit(i); x != y {
			return signOf(x > y)
		}
	}
	switch {
	case a.significant == b.significant:
		return 0
	default:
		return signOf(a.significant > b.significant)
	}
}

// mantissa returns the significant digits as an integer when they fit 19
// digits (always less than 2^64).
func (d *decimal) mantissa() (uint64, bool) {
	if d.significant > 19 {
		return 0, false
	}
	var m uint64
	for i := 0; i < d.significant; i++ {
		m = m*10 + uint64(d.significantDigit(i)-'0')
	}
	return m, true
}

// multipleOf reports whether d / m is an integer, m being positive; ok is
// false when a mantissa has more than 19 digits.
func (d *decimal) multipleOf(m *decimal) (yes, ok bool) {
	if d.isZero() {
		return true, true
	}
	dMantissa, ok1 := d.mantissa()
	mMantissa, ok2 := m.mantissa()
	if !ok1 || !ok2 || mMantissa == 0 {
		return false, false
	}
	// d = dMantissa × 10^dExp and m = mMantissa × 10^mExp, so
	// d/m = dMantissa/mMantissa × 10^shift.
	shift := (d.point - d.significant) - (m.point - m.significant)
	if shift >= 0 {
		return mulMod(dMantissa%mMantissa, powMod(10, shift, mMantissa), mMantissa) == 0, true
	}
	if -shift > 19 {
		return false, true // mMantissa × 10^-shift exceeds dMantissa, which is not zero
	}
	high, divisor := bits.Mul64(mMantissa, pow10[-shift])
	if high != 0 {
		return false, true
	}
	return dMantissa%divisor == 0, true
}

var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func mulMod(a, b, m uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return bits.Rem64(hi, lo, m)
}

func powMod(base uint64, exp int, m uint64) uint64 {
	r := uint64(1) % m
	base %= m
	for exp > 0 {
		if exp&1 == 1 {
			r = mulMod(r, base, m)
		}
		base = mulMod(base, base, m)
		exp >>= 1
	}
	return r
}

// maxBoundBits bounds the schema numbers the fast path takes (about 1,200
// decimal digits); a schema with a larger one stays on the library.
const maxBoundBits = 4096

// ratDecimal writes a schema's bound (held by the schema library as an
// exact rational) as the decimal it came from. It reports false for a
// rational with no finite decimal form, which no JSON number has.
func ratDecimal(r *big.Rat) (decimal, bool) {
	if r.Num().BitLen() > maxBoundBits || r.Denom().BitLen() > maxBoundBits {
		return decimal{}, false
	}
	denominator := new(big.Int).Set(r.Denom())
	twos, fives := 0, 0
	zero, remainder := new(big.Int), new(big.Int)
	for _, factor := range []struct {
		prime int64
		count *int
	}{{2, &twos}, {5, &fives}} {
		prime := big.NewInt(factor.prime)
		for {
			quotient, rest := new(big.Int).QuoRem(denominator, prime, remainder)
			if rest.Cmp(zero) != 0 {
				break
			}
			denominator = quotient
			*factor.count++
		}
	}
	if denominator.Cmp(big.NewInt(1)) != 0 {
		return decimal{}, false
	}
	return parseDecimal(r.FloatString(max(twos, fives)))
}
