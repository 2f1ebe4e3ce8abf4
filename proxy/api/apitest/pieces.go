package apitest

// Pieces turns a fuzzer's bytes into the sizes of the pieces a stream of
// size bytes is written in: each byte, plus one, is the next piece, the
// last byte repeating until the stream is covered; no bytes, one piece.
func Pieces(cuts []byte, size int) []int {
	if len(cuts) == 0 {
		return []int{size}
	}
	var out []int
	for i := 0; size > 0; i++ {
		n := min(size, int(cuts[min(i, len(cuts)-1)])+1)
		out = append(out, n)
		size -= n
	}
	return out
}
