package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The pins API (docs/pins.md, "Held drift: the admin API"), behind the same tokens as /approvals:
//
//	GET  /pins                   drifted tool definitions, with a diff
//	POST /pins/{server}/{tool}   {"decision":"accept"|"reject","by":"…"}

const pinBodyHint = `send {"decision":"accept"|"reject","by":"<who>"}`

type pinsView struct {
	Drifts []Drift `json:"drifts"`
}

func (s *Service) pinList(w http.ResponseWriter, r *http.Request) {
	ps := PinsOf(s.cfg.Store)
	if ps == nil {
		writeJSON(w, http.StatusOK, pinsView{Drifts: []Drift{}})
		return
	}
	ds, err := ps.Drifts(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, pinsView{Drifts: ds})
}

func (s *Service) pinDecide(w http.ResponseWriter, r *http.Request) {
	server, tool := r.PathValue("server"), r.PathValue("tool")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		apiError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes; %s", MaxBodyBytes, pinBodyHint))
		return
	}
	accept, by, msg := parsePinDecision(body)
	if k, ok := r.Context().Value(ctxKey{}).(acceptedToken); ok && k.named && msg == "" {
		by = k.name
	} else if msg == "" && by == "" {
		msg = `"by" is required: who decides (a name or an id)`
	}
	if msg != "" {
		apiError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	ps := PinsOf(s.cfg.Store)
	if ps == nil {
		apiError(w, http.StatusNotFound, "unknown", ErrNoDrift.Error())
		return
	}
	d, err := ps.Resolve(r.Context(), server, tool, accept, by, s.cfg.Now())
	if errors.Is(err, ErrNoDrift) {
		apiError(w, http.StatusNotFound, "unknown", err.Error())
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	if s.cfg.PinDecided != nil {
		s.cfg.PinDecided(d)
	}
	writeJSON(w, http.StatusOK, d)
}

// parsePinDecision checks a pin decision body as ParseDecision checks an
// approval's: one object, known members, none twice, a printable by.
func parsePinDecision(body []byte) (accept bool, by, msg string) {
	var b struct {
		Decision string `json:"decision"`
		By       string `json:"by"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return false, "", "the body is not a decision object (" + err.Error() + "); " + pinBodyHint
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false, "", "the body has more than one JSON value; " + pinBodyHint
	}
	if _, err := Canonical(body); err != nil {
		return false, "", "the body gives a member twice; nothing was decided"
	}
	var names map[string]json.RawMessage
	if err := json.Unmarshal(body, &names); err != nil {
		return false, "", "the body is not a decision object; " + pinBodyHint
	}
	for n := range names {
		if n != "decision" && n != "by" {
			return false, "", fmt.Sprintf("the body has a member %q; %s", n, pinBodyHint)
		}
	}
	switch b.Decision {
	case "accept":
		accept = true
	case "reject":
	default:
		return false, "", fmt.Sprintf(`decision %q is not "accept" or "reject"`, b.Decision)
	}
	if msg := textProblem("by", b.By, maxBy, false); msg != "" {
		return false, "", msg
	}
	return accept, strings.TrimSpace(b.By), ""
}
