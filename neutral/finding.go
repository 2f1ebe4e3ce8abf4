package neutral

// Finding is one reason a call was refused, as a codec writes it into a
// refusal. The checks keep their own richer type; this is what crosses to
// a codec, which never judges.
type Finding struct {
	Code    string
	Pointer string
	Keyword string
	// Message is safe for logs and sinks.
	Message string
	// Detail is the full reason for the model; it may quote values.
	Detail string
	// Reason is an operator validator's own words, for the client only.
	Reason string
	// Blocking is set when the finding made the call invalid; the others
	// (provenance_unverifiable) are reported but refused nothing.
	Blocking bool
}
