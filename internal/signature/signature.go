// Package signature signs the bodies toolgate sends to the operator's
// endpoints (escalation webhooks, validators), one way for all of them.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Header is where the signature travels.
const Header = "X-Toolgate-Signature"

// Sign returns the signature header value for body: "sha256=" followed by
// the lower-case hex HMAC-SHA256 of the exact body bytes under secret. A
// receiver recomputes it over the raw body it read and compares the two
// with hmac.Equal.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
