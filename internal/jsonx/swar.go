package jsonx

import (
	"encoding/binary"
	"math/bits"
)

// Strings are most of what the scanners read, and most string bytes need
// no decision. These find the next byte that does eight bytes at a time:
// a word holds one when x^c has a zero byte (the quote and the backslash)
// or x has a byte below 0x20. Each test can flag a byte above a true
// match, never below one, so the lowest flagged byte is exact.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func zeroByte(x uint64) uint64 { return (x - ones) &^ x & highs }

// quoteOrEscape returns the index of the first quote or backslash in d at
// or after i, or len(d).
func quoteOrEscape(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		if m := zeroByte(x^(ones*'"')) | zeroByte(x^(ones*'\\')); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(d) && d[i] != '"' && d[i] != '\\'; i++ {
	}
	return i
}

// stringStop returns the index of the first quote, backslash or control
// character in d at or after i, or len(d).
func stringStop(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		m := zeroByte(x^(ones*'"')) | zeroByte(x^(ones*'\\')) | (x-ones*0x20)&^x&highs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(d) && plainByte[d[i]]; i++ {
	}
	return i
}

// stringStopHigh is stringStop that also stops at a byte above 0x7F, for a
// reader that checks the UTF-8 of what it reads.
func stringStopHigh(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		m := zeroByte(x^(ones*'"')) | zeroByte(x^(ones*'\\')) | (x-ones*0x20)&^x&highs | x&highs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(d) && plainByte[d[i]] && d[i] < 0x80; i++ {
	}
	return i
}
