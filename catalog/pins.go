package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

// Pins says how MCP tool definitions are pinned against a server changing
// them after they were reviewed (docs/pins.md).
type Pins struct {
	// File is the pin file `toolgate pin` writes, relative to the
	// config's folder.
	File string `yaml:"file"`
	// FirstUse pins what each server first lists, in approvals.store.
	FirstUse bool `yaml:"first_use"`
	// OnDrift is what a definition unlike its pin gets: block, hold or
	// warn.
	OnDrift string `yaml:"on_drift"`
}

// What a drifted tool definition gets (catalog.pins.on_drift).
const (
	DriftBlock = "block"
	DriftHold  = "hold"
	DriftWarn  = "warn"
)

// Enabled reports whether any definition is judged against a pin.
func (p Pins) Enabled() bool { return p.File != "" || p.FirstUse }

// Refuses reports whether a drifted tool is taken out and its calls
// refused.
func (p Pins) Refuses() bool { return p.OnDrift == DriftBlock || p.OnDrift == DriftHold }

// PinFile is the pin file: per server and tool, the digest and the
// definition it was taken of. encoding/json writes maps in key order, so
// the same tools always make the same file.
type PinFile struct {
	Servers map[string]map[string]PinEntry `json:"servers"`
}

// PinEntry is one pinned tool definition.
type PinEntry struct {
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition"`
}

var pinDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ParsePinFile reads a pin file, refusing one whose entries would pin
// nothing: an unknown member, a bad digest, or no definition.
func ParsePinFile(data []byte) (*PinFile, error) {
	var f PinFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a pin file: %v", err)
	}
	servers := make([]string, 0, len(f.Servers))
	for s := range f.Servers {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		for tool, e := range f.Servers[s] {
			if !pinDigest.MatchString(e.Digest) {
				return nil, fmt.Errorf("servers.%s.%s.digest %q is not sha256:<64 hex digits>", s, tool, e.Digest)
			}
			if len(e.Definition) == 0 {
				return nil, fmt.Errorf("servers.%s.%s has no definition", s, tool)
			}
		}
	}
	if f.Servers == nil {
		f.Servers = map[string]map[string]PinEntry{}
	}
	return &f, nil
}

// Encode writes the file as people review it: indented, keys in order,
// one newline at the end.
func (f *PinFile) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// setMCPDefaults fills in what the catalog says of MCP servers' tools.
func (c *Catalog) setMCPDefaults() {
	setString(&c.MCP.Expose, ExposeAll)
	setString(&c.Pins.OnDrift, DriftBlock)
}

// validatePins checks catalog.pins.
func (c *Config) validatePins(ps *problems) {
	p := c.Catalog.Pins
	oneOf(ps, "catalog.pins.on_drift", p.OnDrift, DriftBlock, DriftHold, DriftWarn)
	if p.Enabled() && len(c.MCPServers) == 0 {
		ps.add("catalog.pins", "pins MCP tool definitions, and mcp_servers is empty")
	}
}

// loadPins reads catalog.pins.file into the snapshot.
func (s *Snapshot) loadPins(ps *problems, baseDir string) {
	f := s.Config.Catalog.Pins.File
	if f == "" {
		return
	}
	data, err := readFile(resolvePath(baseDir, f))
	if err != nil {
		ps.add("catalog.pins.file", "%v (write it with `toolgate pin --config FILE`)", err)
		return
	}
	pf, err := ParsePinFile(data)
	if err != nil {
		ps.add("catalog.pins.file", "%s: %v", f, err)
		return
	}
	s.Pins = pf
}
