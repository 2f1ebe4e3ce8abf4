package approval

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The approvals page (docs/approvals.md, "The approvals page"): plain HTML forms that work
// without JavaScript, served from the binary with nothing fetched from
// another host. A login trades an admin token for a signed session
// cookie; every change carries a CSRF token derived from the session.

//go:embed page
var pageFS embed.FS

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{"short": shortDigest}).ParseFS(pageFS, "page/*.html"))

// shortDigest shows a digest as people compare them: its first 12 hex
// digits (the full one is the element's title).
func shortDigest(d string) string {
	const keep = len("sha256:") + 12
	if len(d) <= keep {
		return d
	}
	return d[:keep] + "…"
}

var pageCSS = func() []byte {
	b, err := pageFS.ReadFile("page/page.css")
	if err != nil {
		panic(err)
	}
	return b
}()

const (
	sessionCookie = "toolgate_approvals"
	// sessionTTL is how long a login lasts.
	sessionTTL = 12 * time.Hour
	// recentDecisions is how many decided approvals the page shows.
	recentDecisions = 20
	// maxFormBytes bounds a login or a decision form.
	maxFormBytes = 16 << 10
)

// pageCSP allows the page's own stylesheet and forms and nothing else: no
// script, no other host, no framing.
const pageCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (s *Service) page(mux *http.ServeMux, ks tokenSet) {
	p := &pageHandler{svc: s, tokens: ks}
	mux.HandleFunc("GET /ui/approvals", p.show)
	mux.HandleFunc("POST /ui/login", p.login)
	mux.HandleFunc("POST /ui/logout", p.logout)
	mux.HandleFunc("POST /ui/approvals/{id}", p.decide)
	mux.HandleFunc("GET /ui/page.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(pageCSS)
	})
}

type pageHandler struct {
	svc    *Service
	tokens tokenSet
}

// session is a signed-in person: the token they signed in with and the
// nonce their CSRF token is derived from.
type session struct {
	token acceptedToken
	nonce string
}

// by is what a decision made in this session records.
func (ss session) by() string {
	if ss.token.named {
		return ss.token.name
	}
	return adminName
}

func (ss session) csrf() string {
	m := hmac.New(sha256.New, ss.token.session)
	m.Write([]byte("csrf|" + ss.nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// cookieValue is "kind|name|expiry|nonce" and its MAC under the token's
// session key, both base64url. The name picks the key: a token removed
// from the config ends its sessions at every replica.
func cookieValue(k acceptedToken, nonce string, exp time.Time) string {
	kind := "a"
	if k.named {
		kind = "n"
	}
	payload := kind + "|" + k.name + "|" + strconv.FormatInt(exp.Unix(), 10) + "|" + nonce
	m := hmac.New(sha256.New, k.session)
	m.Write([]byte(payload))
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(m.Sum(nil))
}

func (p *pageHandler) session(r *http.Request, now time.Time) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	enc := base64.RawURLEncoding.Strict()
	encodedPayload, mac, ok := strings.Cut(c.Value, ".")
	payload, err1 := enc.DecodeString(encodedPayload)
	sum, err2 := enc.DecodeString(mac)
	if !ok || err1 != nil || err2 != nil {
		return session{}, false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 4 || (parts[0] != "a" && parts[0] != "n") {
		return session{}, false
	}
	k, ok := p.tokens.byName(parts[0] == "n", parts[1])
	if !ok {
		return session{}, false
	}
	m := hmac.New(sha256.New, k.session)
	m.Write(payload)
	if !hmac.Equal(m.Sum(nil), sum) {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return session{}, false
	}
	return session{token: k, nonce: parts[3]}, true
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// pageData is what the template shows.
type pageData struct {
	Login   bool
	Closed  bool
	Message string
	Error   string
	By      string
	CSRF    string
	Pending []pageItem
	Recent  []pageItem
}

// pageItem is one approval as the page shows it.
type pageItem struct {
	View
	ArgsText string
}

func (p *pageHandler) render(w http.ResponseWriter, status int, d pageData) {
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, "page.html", d); err != nil {
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (p *pageHandler) show(w http.ResponseWriter, r *http.Request) {
	if len(p.tokens) == 0 {
		p.render(w, http.StatusForbidden, pageData{Closed: true})
		return
	}
	ss, ok := p.session(r, p.svc.cfg.Now())
	if !ok {
		p.render(w, http.StatusOK, pageData{Login: true})
		return
	}
	d := pageData{By: ss.by(), CSRF: ss.csrf()}
	// The redirect after a decision says what was done; only an id and a
	// state name, so a crafted link cannot put words on the page.
	if id, err := ParseID(r.URL.Query().Get("decided")); err == nil {
		if st, ok := ParseState(r.URL.Query().Get("state")); ok {
			d.Message = id + " " + string(st)
		}
	}
	recs, err := p.svc.cfg.Store.List(r.Context(), "")
	if err != nil {
		d.Error = storeText(err)
		p.render(w, statusOf(err), d)
		return
	}
	for _, rec := range recs {
		it := p.item(rec)
		if rec.State == Pending {
			d.Pending = append(d.Pending, it)
		} else if !rec.DecidedAt.IsZero() || rec.State == Released {
			d.Recent = append(d.Recent, it)
		}
	}
	slices.SortStableFunc(d.Recent, func(a, b pageItem) int { return b.lastChange().Compare(a.lastChange()) })
	if len(d.Recent) > recentDecisions {
		d.Recent = d.Recent[:recentDecisions]
	}
	p.render(w, http.StatusOK, d)
}

func (it pageItem) lastChange() time.Time {
	if it.ReleasedAt.After(it.DecidedAt) {
		return it.ReleasedAt
	}
	return it.DecidedAt
}

func (p *pageHandler) item(rec *Record) pageItem {
	v := p.svc.view(rec)
	it := pageItem{View: v}
	var buf bytes.Buffer
	for i, c := range v.Calls {
		if i > 0 {
			buf.WriteString("\n")
		}
		if len(v.Calls) > 1 {
			buf.WriteString(c.Tool + ": ")
		}
		if json.Indent(&buf, c.Arguments, "", "  ") != nil {
			buf.Write(c.Arguments)
		}
	}
	it.ArgsText = buf.String()
	return it
}

// readForm parses a bounded urlencoded form; a field given twice is
// refused, as a JSON member given twice is.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return nil, false
	}
	for _, vs := range r.PostForm {
		if len(vs) != 1 {
			return nil, false
		}
	}
	return r.PostForm, true
}

func (p *pageHandler) login(w http.ResponseWriter, r *http.Request) {
	if len(p.tokens) == 0 {
		p.render(w, http.StatusForbidden, pageData{Closed: true})
		return
	}
	f, ok := readForm(w, r)
	if !ok {
		p.render(w, http.StatusBadRequest, pageData{Login: true, Error: "The form could not be read."})
		return
	}
	k, ok := p.tokens.match(f.Get("token"))
	if !ok {
		p.render(w, http.StatusForbidden, pageData{Login: true, Error: "That is not an approvals admin token."})
		return
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	exp := p.svc.cfg.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: cookieValue(k, hex.EncodeToString(nonce), exp), Path: "/ui/",
		Expires: exp, MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
}

func (p *pageHandler) logout(w http.ResponseWriter, r *http.Request) {
	ss, ok := p.session(r, p.svc.cfg.Now())
	f, formRead := readForm(w, r)
	if ok && formRead && hmac.Equal([]byte(f.Get("csrf")), []byte(ss.csrf())) {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
}

func (p *pageHandler) decide(w http.ResponseWriter, r *http.Request) {
	ss, ok := p.session(r, p.svc.cfg.Now())
	if !ok {
		p.render(w, http.StatusUnauthorized, pageData{Login: true, Error: "Sign in again; nothing was decided."})
		return
	}
	d := pageData{By: ss.by(), CSRF: ss.csrf()}
	f, ok := readForm(w, r)
	if !ok || !hmac.Equal([]byte(f.Get("csrf")), []byte(d.CSRF)) {
		d.Error = "The form was not this page's (its check value is missing or wrong); nothing was decided."
		p.render(w, http.StatusForbidden, d)
		return
	}
	id, err := ParseID(r.PathValue("id"))
	dec := Decision{By: ss.by(), Note: f.Get("note")}
	switch f.Get("decision") {
	case "approve":
		dec.Approve = true
	case "deny":
	default:
		err = errors.New(`decision must be "approve" or "deny"`)
	}
	if err == nil {
		if msg := textProblem("note", dec.Note, maxNote, true); msg != "" {
			err = errors.New(msg)
		}
	}
	if err != nil {
		d.Error = err.Error() + "; nothing was decided."
		p.render(w, http.StatusBadRequest, d)
		return
	}
	rec, err := p.svc.Decide(r.Context(), id, dec)
	if err != nil {
		d.Error = storeText(err)
		p.render(w, statusOf(err), d)
		return
	}
	q := url.Values{"decided": {rec.ID}, "state": {string(rec.State)}}
	http.Redirect(w, r, "/ui/approvals?"+q.Encode()+"#"+rec.ID, http.StatusSeeOther)
}

func statusOf(err error) int {
	if rf, ok := AsRefusal(err); ok {
		return rf.Status()
	}
	if errors.Is(err, ErrUnavailable) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func storeText(err error) string {
	if rf, ok := AsRefusal(err); ok {
		switch rf.Code {
		case CodeUnknown:
			return "No such approval; nothing was decided."
		case CodeExpired:
			return "The approval expired before it was decided."
		case CodeDecided:
			return "The approval was already decided: it is " + string(rf.State) + "."
		}
		return "Refused: " + string(rf.Code) + "."
	}
	if errors.Is(err, ErrUnavailable) {
		return "The approval store cannot be reached; nothing was changed. Try again."
	}
	return "The approval could not be read."
}
