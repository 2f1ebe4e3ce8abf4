package catalog

import (
	"bytes"
	"slices"
	"strings"
)

// Effective works out which tools one request may call (docs/config.md,
// catalog.mode and catalog.unlisted). offered are the request's function
// tools; requestParsed is false when the body could not be read, and then the
// catalog alone applies whatever the mode, since there is nothing else to
// judge by. The result is read-only.
//
// This runs on every request, so the common cases allocate little: mode
// config without narrowing returns one Effective shared by all requests,
// and tools the request declares reuse compiled schemas from a cache.
func (s *Snapshot) Effective(offered []Offered, choice ToolChoice, requestParsed bool) *Effective {
	mode, unlisted := CatalogIntersect, UnlistedAllow
	var strip []string
	if s.Config != nil {
		mode, unlisted, strip = s.Config.Catalog.Mode, s.Config.Catalog.Unlisted, s.Config.Catalog.StripPrefixes
	}
	if !requestParsed {
		mode = CatalogConfig
	}
	if mode == CatalogIntersect && len(s.Tools) == 0 {
		mode = CatalogRequest // zero-config: the request's tools are the catalog
	}

	var e *Effective
	switch mode {
	case CatalogConfig:
		e = s.all
		if e == nil {
			e = s.catalogOnly()
		}
	case CatalogRequest:
		e = &Effective{Version: s.Version, strip: strip, tools: make(map[string]*Tool, len(offered))}
		req := make([]Tool, len(offered))
		for i, o := range offered {
			if _, dup := e.tools[o.Name]; !dup {
				e.tools[o.Name] = s.requestTool(&req[i], o)
			}
		}
	default:
		e = &Effective{Version: s.Version, strip: strip, catalog: s.Tools, tools: make(map[string]*Tool, len(offered))}
		var req []Tool
		for _, o := range offered {
			if _, dup := e.tools[o.Name]; dup {
				continue
			}
			if t, ok := s.Tools[o.Name]; ok {
				e.tools[o.Name] = t
				continue
			}
			if unlisted == UnlistedReject {
				if e.rejected == nil {
					e.rejected = map[string]struct{}{}
				}
				e.rejected[o.Name] = struct{}{}
				continue
			}
			if req == nil {
				req = make([]Tool, len(offered)) // one allocation for all of them
			}
			i := len(e.tools)
			e.tools[o.Name] = s.requestTool(&req[i], o)
		}
	}
	return e.narrow(choice)
}

// catalogOnly builds the Effective of the whole catalog, with its sorted
// list filled so that sharing it between requests involves no writes.
func (s *Snapshot) catalogOnly() *Effective {
	e := &Effective{Version: s.Version, tools: s.Tools}
	if s.Config != nil {
		e.strip = s.Config.Catalog.StripPrefixes
	}
	e.Tools()
	return e
}

// requestTool fills t as the tool a request declared, judged by its own
// schema. A schema that does not compile leaves Schema nil and says why in
// SchemaError: the tool stays real, and its calls pass with only their
// object shape checked (see validate.Check).
func (s *Snapshot) requestTool(t *Tool, o Offered) *Tool {
	*t = Tool{
		Name:          o.Name,
		Description:   o.Description,
		Parameters:    o.Parameters,
		Policy:        PolicyExecute,
		Substitutable: true,
		FromRequest:   true,
	}
	params := bytes.TrimSpace(o.Parameters)
	if len(params) == 0 || string(params) == "null" {
		return t
	}
	e := s.schemaCache().Entry(params)
	t.Schema, t.SchemaError, t.fast = e.Schema, e.Err, e.Fast
	if e.Err != nil {
		t.uncompiled = e
	}
	return t
}

// narrow applies tool_choice. Names it takes away stay known as "not
// offered", so a call to one is reported as such rather than as invented.
func (e *Effective) narrow(choice ToolChoice) *Effective {
	var keep []string
	switch choice.Kind {
	case ChoiceNone:
	case ChoiceNamed:
		if len(choice.Names) > 0 {
			keep = choice.Names[:1]
		}
	case ChoiceAllowed:
		keep = choice.Names
	default:
		return e
	}
	out := &Effective{
		Version:  e.Version,
		narrowed: e.tools,
		catalog:  e.catalog,
		rejected: e.rejected,
		strip:    e.strip,
	}
	for _, n := range keep {
		if t, ok := e.tools[n]; ok {
			if out.tools == nil {
				out.tools = make(map[string]*Tool, len(keep))
			}
			out.tools[n] = t
		}
	}
	return out
}

// StripPrefixes returns the operator's strip_prefixes that Lookup applies.
func (e *Effective) StripPrefixes() []string { return e.strip }

// Names returns the callable tool names, sorted.
func (e *Effective) Names() []string {
	ts := e.Tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// sortTools orders tools by name.
func sortTools(ts []*Tool) {
	slices.SortFunc(ts, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
}
