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
	neg bool
	// intd and frac are the digits before and after the point.
	intd, frac string
	// lead and n locate the significant digits (no leading or trailing
	// zeros) in intd+frac: n == 0 means the value is zero.
	lead, n int
	// point is where the decimal point falls relative to the first
	// significant digit: the value is 0.d1d2…dn × 10^point.
	point int
}

// maxExponent bounds the exponents read. The schema library reads a
// number with big.Rat.SetString, which refuses a non-zero number whose
// exponent, less the digits after the point, is beyond ±1e6 (the library
// then finds it no integer, equal to nothing, and cannot compare it). Such
// numbers get no verdict here, so the library's answer stands.
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
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	d.intd = s[start:i]
	if len(d.intd) == 0 || (len(d.intd) > 1 && d.intd[0] == '0') {
		return d, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		d.frac = s[start:i]
		if len(d.frac) == 0 {
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
	if e := exp - len(d.frac); !d.isZero() && (e > maxRatExponent || e < -maxRatExponent) {
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
	all := len(d.intd) + len(d.frac)
	lead := 0
	for lead < all && d.digit(lead) == '0' {
		lead++
	}
	end := all
	for end > lead && d.digit(end-1) == '0' {
		end--
	}
	d.lead, d.n = lead, end-lead
	d.point = len(d.intd) - lead + exp
}

// digit returns the i-th digit of intd+frac.
func (d *decimal) digit(i int) byte {
	if i < len(d.intd) {
		return d.intd[i]
	}
	return d.frac[i-len(d.intd)]
}

// sig returns the i-th significant digit.
func (d *decimal) sig(i int) byte { return d.digit(d.lead + i) }

func (d *decimal) isZero() bool { return d.n == 0 }

// isInt reports whether the value has no fractional part.
func (d *decimal) isInt() bool { return d.n <= d.point }

// cmp compares the values of a and b: -1, 0 or +1.
func (a *decimal) cmp(b *decimal) int {
	switch {
	case a.isZero() && b.isZero():
		return 0
	case a.isZero():
		return signOf(!b.neg) * -1
	case b.isZero():
		return signOf(!a.neg)
	case a.neg != b.neg:
		return signOf(b.neg)
	}
	m := a.cmpAbs(b)
	if a.neg {
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
	for i := 0; i < a.n && i < b.n; i++ {
		if x, y := a.sig(i), b.sig(i); x != y {
			return signOf(x > y)
		}
	}
	switch {
	case a.n == b.n:
		return 0
	default:
		return signOf(a.n > b.n)
	}
}

// mantissa returns the significant digits as an integer when they fit 19
// digits (always less than 2^64).
func (d *decimal) mantissa() (uint64, bool) {
	if d.n > 19 {
		return 0, false
	}
	var m uint64
	for i := 0; i < d.n; i++ {
		m = m*10 + uint64(d.sig(i)-'0')
	}
	return m, true
}

// multipleOf reports whether d / m is an integer, m being positive; ok is
// false when a mantissa has more than 19 digits.
func (d *decimal) multipleOf(m *decimal) (yes, ok bool) {
	if d.isZero() {
		return true, true
	}
	dv, ok1 := d.mantissa()
	mv, ok2 := m.mantissa()
	if !ok1 || !ok2 || mv == 0 {
		return false, false
	}
	// d = dv × 10^ds and m = mv × 10^ms, so d/m = dv/mv × 10^k.
	k := (d.point - d.n) - (m.point - m.n)
	if k >= 0 {
		return mulMod(dv%mv, powMod(10, k, mv), mv) == 0, true
	}
	if -k > 19 {
		return false, true // mv × 10^-k exceeds dv, which is not zero
	}
	hi, div := bits.Mul64(mv, pow10[-k])
	if hi != 0 {
		return false, true
	}
	return dv%div == 0, true
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
	den := new(big.Int).Set(r.Denom())
	two, five := 0, 0
	zero, rem := new(big.Int), new(big.Int)
	for _, f := range []struct {
		p int64
		n *int
	}{{2, &two}, {5, &five}} {
		p := big.NewInt(f.p)
		for {
			q, m := new(big.Int).QuoRem(den, p, rem)
			if m.Cmp(zero) != 0 {
				break
			}
			den = q
			*f.n++
		}
	}
	if den.Cmp(big.NewInt(1)) != 0 {
		return decimal{}, false
	}
	return parseDecimal(r.FloatString(max(two, five)))
}
