// Package exchange is the HTTP side of a model API's judged route: one
// exchange per request, from the client's body to the answer it gets. It
// reads the request, sends it upstream (proxy/upstream), reads a whole
// answer or follows a stream event by event through the API's codec, has
// the ladder judge the calls, asks proxy/pipeline for the verdict, carries
// out its effects (counts, escalation records, a held approval) and
// writes the reply the two make, through its one writer.
//
// What is decided is the pipeline's; what goes over the wire is this
// package's. A plain answer takes serveAnswer (exchange.go), a stream
// serveStream (stream.go); both end in perform (effects.go) and write
// (reply.go).
package exchange
