package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/schema"
)

// MCPTool is one tool as an MCP server's tools/list answer describes it.
type MCPTool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Destructive is the destructiveHint annotation.
	Destructive bool
	// Raw is the tool object as the server sent it; it feeds the version.
	Raw json.RawMessage
}

// MCPSet is what one MCP server's tool list means under one Snapshot: the
// tools a client may see and call, judged as the catalog says.
type MCPSet struct {
	// Version labels metrics and escalations. It covers the snapshot's
	// catalog and the server's whole tool list, so a server that changes
	// its tools is a new version.
	Version string
	// Eff resolves called names; hidden tools are not in it.
	Eff *Effective
	// Visible are the callable tool names, sorted.
	Visible []string
	// Hidden are listed tools expose: catalog keeps from the client.
	Hidden map[string]bool
	// Input holds the server's own compiled inputSchema of a tool whose
	// catalog entry brings a stricter schema: both must pass.
	Input map[string]*MCPSchema
	// Output holds each tool's compiled outputSchema.
	Output map[string]*MCPSchema
	// Labels are the metric tool labels by name ("server/tool").
	Labels map[string]string
}

// MCPSchema is a server-declared schema, compiled, or why it did not.
type MCPSchema struct {
	Schema *jsonschema.Schema
	Err    error
}

// MCPSet builds the judged catalog of server's listed tools. A server/tool
// catalog entry adds its rules, provenance, policy and schema; with
// catalog.mcp.expose: catalog, a tool without an entry is hidden.
func (s *Snapshot) MCPSet(server string, listed []MCPTool) *MCPSet {
	set := &MCPSet{Hidden: map[string]bool{}, Input: map[string]*MCPSchema{}, Output: map[string]*MCPSchema{}, Labels: map[string]string{}}
	policy := MCPPolicy{Expose: ExposeAll}
	if s.Config != nil {
		policy = s.Config.Catalog.MCP
	}
	tools := make(map[string]*Tool, len(listed))
	for _, offered := range listed {
		if _, dup := tools[offered.Name]; dup || set.Hidden[offered.Name] {
			continue
		}
		entry := s.MCPTools[server+"/"+offered.Name]
		if entry == nil && policy.Expose == ExposeCatalog {
			set.Hidden[offered.Name] = true
			continue
		}
		t := &Tool{Name: offered.Name, Description: offered.Description, Parameters: compactJSON(offered.InputSchema), Policy: PolicyExecute}
		own := &MCPSchema{}
		var fast *schema.Fast
		if t.Parameters != nil {
			compiled := s.schemaCache().Entry(t.Parameters)
			own.Schema, own.Err, fast = compiled.Schema, compiled.Err, compiled.Fast
		}
		t.Schema, t.SchemaError, t.fast = own.Schema, own.Err, fast
		if entry != nil {
			t.Description = firstNonEmpty(entry.Description, offered.Description)
			t.Policy, t.Provenance, t.Rules, t.ResultRules = entry.Policy, entry.Provenance, entry.Rules, entry.ResultRules
			if entry.Schema != nil {
				t.Schema, t.SchemaError, t.Parameters, t.fast = entry.Schema, nil, entry.Parameters, entry.fast
				if own.Schema != nil || own.Err != nil {
					set.Input[offered.Name] = own
				}
			}
		}
		if policy.ConfirmDestructive && offered.Destructive {
			t.Policy = PolicyConfirm
		}
		if out := compactJSON(offered.OutputSchema); out != nil {
			output := &MCPSchema{}
			output.Schema, output.Err = s.schemaCache().Get(out)
			set.Output[offered.Name] = output
		}
		tools[offered.Name] = t
		set.Labels[offered.Name] = server + "/" + offered.Name
		set.Visible = append(set.Visible, offered.Name)
	}
	sort.Strings(set.Visible)
	set.Version = mcpVersion(s.Version, server, listed)
	set.Eff = &Effective{Version: set.Version, tools: tools}
	set.Eff.Tools()
	return set
}

// schemaCache is the snapshot's cache of request schemas; one made other
// than by Compile uses the default settings' cache.
func (s *Snapshot) schemaCache() *schema.Cache {
	if s.schemas == nil {
		return schema.RequestCache(schema.Options{})
	}
	return s.schemas
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mcpVersion hashes the snapshot's version, the server and its tools in
// name order, each as the server described it.
func mcpVersion(base, server string, listed []MCPTool) string {
	sorted := append([]MCPTool(nil), listed...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	h.Write([]byte(base))
	h.Write([]byte{0})
	h.Write([]byte(server))
	for _, t := range sorted {
		h.Write([]byte{0})
		raw := compactJSON(t.Raw)
		if raw == nil {
			raw = []byte(t.Name)
		}
		h.Write(bytes.TrimSpace(raw))
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))[:12]
}
