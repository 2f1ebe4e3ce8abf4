package test

import (
	"github.com/toolgate/toolgate/proxy"
)

// ticket is an escalation's approval object (SPEC §5a).
type ticket struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ExpiresAt  string `json:"expires_at"`
	CallDigest string `json:"call_digest"`
	Secret     string `json:"secret"`
}

// escalationRecords keeps the sink records that are escalations, leaving
// out the approvals' state changes.
func escalationRecords(recs []*proxy.EscalationRecord) []*proxy.EscalationRecord {
	var out []*proxy.EscalationRecord
	for _, r := range recs {
		if r.Escalation != nil {
			out = append(out, r)
		}
	}
	return out
}
