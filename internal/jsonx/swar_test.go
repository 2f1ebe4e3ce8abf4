package jsonx

import "testing"

// naiveStop is what stringStop and quoteOrEscape must return, a byte at a
// time.
func naiveStop(d []byte, i int, ctl bool) int {
	for ; i < len(d); i++ {
		if c := d[i]; c == '"' || c == '\\' || ctl && c < 0x20 {
			return i
		}
	}
	return len(d)
}

func checkStops(t *testing.T, d []byte) {
	t.Helper()
	for i := 0; i <= len(d); i++ {
		if got, want := quoteOrEscape(d, i), naiveStop(d, i, false); got != want {
			t.Fatalf("quoteOrEscape(%q, %d) = %d, want %d", d, i, got, want)
		}
		if got, want := stringStop(d, i), naiveStop(d, i, true); got != want {
			t.Fatalf("stringStop(%q, %d) = %d, want %d", d, i, got, want)
		}
	}
}

// TestStopsEveryByteEveryPlace puts each byte value at each place of a
// buffer longer than two words, alone and after each other value, so a
// borrow from one byte into the next (the way a word test can go wrong)
// is tried for every pair.
func TestStopsEveryByteEveryPlace(t *testing.T) {
	base := []byte("abcdefghijklmnopqrs")
	for b := range 256 {
		for p := range base {
			d := append([]byte(nil), base...)
			d[p] = byte(b)
			checkStops(t, d)
		}
		for a := range 256 {
			d := append([]byte(nil), base...)
			d[6], d[7], d[8] = byte(a), byte(b), byte(a)
			checkStops(t, d)
		}
	}
}

func FuzzStops(f *testing.F) {
	f.Add([]byte(`"plain text with no escapes at all, long enough for words"`))
	f.Add([]byte("\x1f\x20\x21\"\\\x7f\x80\xa2\xdc\xff"))
	f.Fuzz(func(t *testing.T, d []byte) { checkStops(t, d) })
}
