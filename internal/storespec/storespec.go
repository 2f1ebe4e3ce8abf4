// Package storespec reads an approvals.store value: where approvals are
// kept. It is a leaf so that the config can check the value and the
// approval package can open it from one definition.
package storespec

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Kinds of store.
const (
	Memory = "memory"
	File   = "file"
	Redis  = "redis"
)

// maxDB is far above any redis "databases" setting seen in practice; it
// only stops a number that cannot be meant.
const maxDB = 1 << 16

// Spec is a parsed approvals.store value.
type Spec struct {
	Kind string
	// Path is the bbolt file of a file store.
	Path string
	// Addr is host:port of a redis store, DB its database number.
	Addr string
	DB   int
}

// String gives the value back in the form Parse reads.
func (s Spec) String() string {
	switch s.Kind {
	case File:
		return "file:" + s.Path
	case Redis:
		return "redis://" + s.Addr + "/" + strconv.Itoa(s.DB)
	}
	return Memory
}

// Parse reads "memory" (or ""), "file:PATH" or "redis://HOST:PORT/DB". The
// redis port defaults to 6379 and the database to 0. Credentials are
// refused: the value is logged and shown by `toolgate check`.
func Parse(s string) (Spec, error) {
	switch {
	case s == "" || s == Memory:
		return Spec{Kind: Memory}, nil
	case strings.HasPrefix(s, "file:"):
		p := strings.TrimPrefix(s, "file:")
		if strings.TrimSpace(p) == "" {
			return Spec{}, errors.New(`"file:" needs a path, e.g. file:/var/lib/toolgate/approvals.db`)
		}
		if strings.ContainsRune(p, 0) {
			return Spec{}, errors.New("the file path contains a NUL byte")
		}
		return Spec{Kind: File, Path: p}, nil
	case strings.HasPrefix(s, "redis://"):
		return parseRedis(s)
	}
	return Spec{}, fmt.Errorf("%q is not one of memory, file:PATH, redis://HOST:PORT/DB", s)
}

func parseRedis(s string) (Spec, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Spec{}, fmt.Errorf("%q is not a valid URL", s)
	}
	switch {
	case u.User != nil:
		return Spec{}, fmt.Errorf("%q must not carry credentials; they would show in logs", s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return Spec{}, fmt.Errorf("%q must not have a query or fragment", s)
	case u.Hostname() == "":
		return Spec{}, fmt.Errorf("%q has no host", s)
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return Spec{}, fmt.Errorf("%q has an empty port", s)
		}
		port = "6379"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return Spec{}, fmt.Errorf("%q has an invalid port", s)
	}
	db := 0
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > maxDB || strconv.Itoa(n) != p {
			return Spec{}, fmt.Errorf("%q: the path must be a database number, e.g. redis://127.0.0.1:6379/0", s)
		}
		db = n
	}
	return Spec{Kind: Redis, Addr: net.JoinHostPort(u.Hostname(), port), DB: db}, nil
}
