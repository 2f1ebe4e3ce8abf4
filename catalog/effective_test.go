package catalog

import (
	"encoding/json"
	"reflect"
	"testing"
)

// effSnapshot compiles a catalog of tools a and b (unless empty) with the
// given catalog settings.
func effSnapshot(t *testing.T, mode, unlisted string, empty bool) *Snapshot {
	t.Helper()
	y := "upstreams: [{url: 'https://x'}]\ncatalog:\n  mode: " + mode + "\n  unlisted: " + unlisted + "\n  strip_prefixes: ['functions.', 'default_api:']\n"
	if !empty {
		y += "  tools:\n    - name: a\n      parameters: {type: object, properties: {n: {type: integer}}}\n    - name: b\n"
	}
	return mustCompileYAML(t, y)
}

func offer(names ...string) []Offered {
	out := make([]Offered, len(names))
	for i, n := range names {
		out[i] = Offered{Name: n, Description: "req " + n, Parameters: json.RawMessage(`{"type":"object","properties":{"r":{"type":"string"}}}`)}
	}
	return out
}

func TestEffective(t *testing.T) {
	auto := ToolChoice{Kind: ChoiceAuto}
	tests := []struct {
		name     string
		mode     string
		unlisted string
		empty    bool
		offered  []Offered
		choice   ToolChoice
		unparsed bool
		// callable are the callable names; fromRequest those judged by the
		// request's schema; status checks other names.
		callable    []string
		fromRequest []string
		status      map[string]Status
	}{
		{name: "intersect", mode: "intersect", unlisted: "allow", offered: offer("a", "x"), choice: auto,
			callable: []string{"a", "x"}, fromRequest: []string{"x"},
			status: map[string]Status{"b": NotOffered, "zzz": Unknown}},
		{name: "intersect reject", mode: "intersect", unlisted: "reject", offered: offer("a", "x"), choice: auto,
			callable: []string{"a"}, status: map[string]Status{"x": NotInCatalog, "b": NotOffered, "zzz": Unknown}},
		{name: "intersect empty catalog", mode: "intersect", unlisted: "reject", empty: true, offered: offer("x", "y"), choice: auto,
			callable: []string{"x", "y"}, fromRequest: []string{"x", "y"}},
		{name: "intersect nothing offered", mode: "intersect", unlisted: "allow", choice: auto,
			callable: nil, status: map[string]Status{"a": NotOffered, "b": NotOffered}},
		{name: "intersect duplicate offer", mode: "intersect", unlisted: "allow", offered: append(offer("x", "a"), offer("x")...), choice: auto,
			callable: []string{"a", "x"}, fromRequest: []string{"x"}},
		{name: "config", mode: "config", unlisted: "allow", offered: offer("a", "x"), choice: auto,
			callable: []string{"a", "b"}, status: map[string]Status{"x": Unknown}},
		{name: "request", mode: "request", unlisted: "reject", offered: offer("a", "x"), choice: auto,
			callable: []string{"a", "x"}, fromRequest: []string{"a", "x"}, status: map[string]Status{"b": Unknown}},
		{name: "unparsed intersect", mode: "intersect", unlisted: "allow", offered: offer("x"), choice: auto, unparsed: true,
			callable: []string{"a", "b"}, status: map[string]Status{"x": Unknown}},
		{name: "unparsed request", mode: "request", unlisted: "allow", offered: offer("x"), choice: auto, unparsed: true,
			callable: []string{"a", "b"}},
		{name: "choice required", mode: "intersect", unlisted: "allow", offered: offer("a", "x"), choice: ToolChoice{Kind: ChoiceRequired},
			callable: []string{"a", "x"}, fromRequest: []string{"x"}},
		{name: "choice none", mode: "intersect", unlisted: "allow", offered: offer("a", "x"), choice: ToolChoice{Kind: ChoiceNone},
			callable: nil, status: map[string]Status{"a": NotOffered, "x": NotOffered, "b": NotOffered, "zzz": Unknown}},
		{name: "choice none config", mode: "config", unlisted: "allow", choice: ToolChoice{Kind: ChoiceNone},
			callable: nil, status: map[string]Status{"a": NotOffered, "b": NotOffered}},
		{name: "choice named", mode: "intersect", unlisted: "allow", offered: offer("a", "x"), choice: ToolChoice{Kind: ChoiceNamed, Names: []string{"x", "a"}},
			callable: []string{"x"}, fromRequest: []string{"x"}, status: map[string]Status{"a": NotOffered}},
		{name: "choice named not offered", mode: "intersect", unlisted: "allow", offered: offer("a"), choice: ToolChoice{Kind: ChoiceNamed, Names: []string{"zzz"}},
			callable: nil, status: map[string]Status{"a": NotOffered, "zzz": Unknown}},
		{name: "choice named without name", mode: "config", unlisted: "allow", choice: ToolChoice{Kind: ChoiceNamed},
			callable: nil, status: map[string]Status{"a": NotOffered}},
		{name: "choice allowed", mode: "config", unlisted: "allow", choice: ToolChoice{Kind: ChoiceAllowed, Names: []string{"b", "nope"}},
			callable: []string{"b"}, status: map[string]Status{"a": NotOffered, "nope": Unknown}},
		{name: "choice allowed keeps rejected", mode: "intersect", unlisted: "reject", offered: offer("a", "x"), choice: ToolChoice{Kind: ChoiceAllowed, Names: []string{"a", "x"}},
			callable: []string{"a"}, status: map[string]Status{"x": NotInCatalog}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := effSnapshot(t, tt.mode, tt.unlisted, tt.empty)
			e := s.Effective(tt.offered, tt.choice, !tt.unparsed)
			if e.Version != s.Version {
				t.Errorf("version %q, want %q", e.Version, s.Version)
			}
			var names, fromReq []string
			for _, tool := range e.Tools() {
				names = append(names, tool.Name)
				if tool.FromRequest {
					fromReq = append(fromReq, tool.Name)
				}
			}
			if !reflect.DeepEqual(names, tt.callable) || e.Len() != len(tt.callable) {
				t.Errorf("callable %v (Len %d), want %v", names, e.Len(), tt.callable)
			}
			if !reflect.DeepEqual(e.Names(), names) && len(names) > 0 {
				t.Errorf("Names %v", e.Names())
			}
			if !reflect.DeepEqual(fromReq, tt.fromRequest) {
				t.Errorf("from request %v, want %v", fromReq, tt.fromRequest)
			}
			for _, n := range tt.callable {
				tool, st, stripped := e.Lookup(n)
				if st != Found || tool == nil || tool.Name != n || stripped {
					t.Errorf("Lookup(%q) = %v, %v, %v", n, tool, st, stripped)
				}
				if tool != nil && !tool.FromRequest && tool != s.Tools[n] {
					t.Errorf("catalog tool %q is not the snapshot's", n)
				}
			}
			for n, want := range tt.status {
				if tool, st, _ := e.Lookup(n); st != want || tool != nil {
					t.Errorf("Lookup(%q) status %v, want %v", n, st, want)
				}
			}
		})
	}
}

func TestEffectiveRequestTools(t *testing.T) {
	s := effSnapshot(t, "intersect", "allow", false)
	offered := []Offered{
		{Name: "good", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "bad", Parameters: json.RawMessage(`{"type":5}`)},
		{Name: "none"},
		{Name: "null", Parameters: json.RawMessage(`null`)},
		{Name: "a", Parameters: json.RawMessage(`{"type":"string"}`)},
	}
	e := s.Effective(offered, ToolChoice{}, true)
	tests := []struct {
		name       string
		tool       string
		schema     bool
		schemaErr  bool
		fromReq    bool
		substitute bool
	}{
		{"compiled", "good", true, false, true, true},
		{"does not compile", "bad", false, true, true, true},
		{"no parameters", "none", false, false, true, true},
		{"null parameters", "null", false, false, true, true},
		{"catalog schema wins", "a", true, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, st, _ := e.Lookup(tt.tool)
			if st != Found {
				t.Fatalf("status %v", st)
			}
			if (tool.Schema != nil) != tt.schema || (tool.SchemaError != nil) != tt.schemaErr || tool.FromRequest != tt.fromReq || tool.Substitutable != tt.substitute {
				t.Errorf("tool %+v", tool)
			}
			if tt.fromReq && tool.Policy != PolicyExecute {
				t.Errorf("policy %q", tool.Policy)
			}
		})
	}
	if again := s.Effective(offered[:1], ToolChoice{}, true); again.tools["good"].Schema != e.tools["good"].Schema {
		t.Error("request schema compiled twice")
	}
}

func TestLookupStripPrefixes(t *testing.T) {
	s := effSnapshot(t, "intersect", "allow", false)
	e := s.Effective(offer("a", "functions.x"), ToolChoice{}, true)
	tests := []struct {
		name     string
		call     string
		tool     string
		status   Status
		stripped bool
	}{
		{"exact", "a", "a", Found, false},
		{"prefix removed", "functions.a", "a", Found, true},
		{"second prefix", "default_api:a", "a", Found, true},
		{"exact name that looks prefixed", "functions.x", "functions.x", Found, false},
		{"prefix of not offered tool", "functions.b", "", NotOffered, true},
		{"prefix then unknown", "functions.zzz", "", Unknown, false},
		{"prefix without separator", "functionsa", "", Unknown, false},
		{"prefix only", "functions.", "", Unknown, false},
		{"prefix removed once only", "functions.functions.a", "", Unknown, false},
		{"suffix is not a prefix", "a.functions", "", Unknown, false},
		{"case matters", "A", "", Unknown, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, st, stripped := e.Lookup(tt.call)
			name := ""
			if tool != nil {
				name = tool.Name
			}
			if name != tt.tool || st != tt.status || stripped != tt.stripped {
				t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v, %v", tt.call, name, st, stripped, tt.tool, tt.status, tt.stripped)
			}
		})
	}
	if got := e.StripPrefixes(); !reflect.DeepEqual(got, []string{"functions.", "default_api:"}) {
		t.Errorf("StripPrefixes %v", got)
	}
}

func TestEffectiveConfigModeIsShared(t *testing.T) {
	s := effSnapshot(t, "config", "allow", false)
	offered := offer("a", "x")
	if s.Effective(offered, ToolChoice{}, true) != s.Effective(nil, ToolChoice{Kind: ChoiceRequired}, false) {
		t.Error("config mode builds a new Effective per request")
	}
	if n := testing.AllocsPerRun(100, func() { s.Effective(offered, ToolChoice{}, true) }); n != 0 {
		t.Errorf("config mode allocates %v times per request", n)
	}
	is := effSnapshot(t, "intersect", "allow", false)
	is.Effective(offered, ToolChoice{}, true) // warm the schema cache
	if n := testing.AllocsPerRun(100, func() { is.Effective(offered, ToolChoice{}, true) }); n > 4 {
		t.Errorf("intersect allocates %v times per request", n)
	}
}

func TestEffectiveHandBuiltSnapshot(t *testing.T) {
	s := &Snapshot{Version: "v", Tools: map[string]*Tool{"a": {Name: "a"}}}
	e := s.Effective(offer("a", "x"), ToolChoice{}, true)
	if e.Len() != 2 {
		t.Errorf("intersect with default settings: %d tools", e.Len())
	}
	if e := s.Effective(nil, ToolChoice{}, false); e.Len() != 1 {
		t.Errorf("catalog only: %d tools", e.Len())
	}
}
