package exchange

import (
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/proxy/pipeline"
)

// A held stream waits under Route.ServeHTTP's frame and those below it:
// what builds an exchange is kept out of line (the reason, and the test
// that guards it, are in proxy/stackdepth.go).

// exchange begins one request's exchange. Out of line, what it takes to
// build one is no part of Route.ServeHTTP's frame.
//
//go:noinline
func (j *Route) exchange(w http.ResponseWriter, r *http.Request) *exchange {
	return &exchange{env: j.env, gen: j.gen, up: j.up, api: j.api, cd: j.api.NewCodec(), series: j.series, w: w, r: r,
		spent: spent{start: time.Now()}, rid: pipeline.RequestID(r.Context()), path: strings.TrimPrefix(r.URL.EscapedPath(), j.prefix)}
}
