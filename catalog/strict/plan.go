package strict

import (
	"crypto/sha256"
	"sync"
)

// Result says what became of one offered function tool: the
// toolgate_strict_tools_total result label.
type Result string

// Strict results.
const (
	Marked  Result = "marked"
	Unfit   Result = "unfit"
	Client  Result = "client"
	Refused Result = "refused"
)

// Tool is one offered function tool as the plan needs it: its name, its
// parameter schema as the request declares it (what the provider will
// judge) and whether the client decided the flag itself.
type Tool struct {
	Name   string
	Schema []byte
	Client bool
}

// Plan is what to ask of the provider for one request: the tools to mark,
// and a result for each offered tool in request order.
type Plan struct {
	Mark    []string
	Results []Result
}

// Memory is one catalog version's memory for strict mode: the fits of
// schemas already judged, and the tools an upstream refused to take
// strict. Both are bounded; a reload starts both afresh with the new
// catalog version. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	fits    map[memoryKey]Fit
	refused map[memoryKey]struct{}
	// order is refused's keys oldest first, to drop the oldest when full.
	order []memoryKey
}

type memoryKey struct {
	provider Provider
	name     string
	sum      [sha256.Size]byte
}

const (
	maxFits    = 4096
	maxRefused = 1024
)

// NewMemory returns an empty memory.
func NewMemory() *Memory {
	return &Memory{fits: map[memoryKey]Fit{}, refused: map[memoryKey]struct{}{}}
}

// Plan decides which of a request's function tools to mark strict. It
// depends only on the memory (what upstreams refused under this catalog
// version) and the tools, so the same tools are marked the same way on
// every request, and prompt caches keyed on them stay warm. perRequest is
// set where the flag is one for the whole request (Gemini's mode): then
// every tool must fit and none may be the client's.
func (m *Memory) Plan(p Provider, tools []Tool, perRequest bool) Plan {
	plan := Plan{Results: make([]Result, len(tools))}
	if perRequest {
		return m.planRequestWide(p, tools, plan)
	}
	var budget anthropicBudget
	for i, t := range tools {
		sum := sha256.Sum256(t.Schema)
		switch {
		case t.Client:
			plan.Results[i] = Client
			budget.take(m.fit(p, sum, t.Schema))
		case m.isRefused(p, t.Name, sum):
			plan.Results[i] = Refused
		default:
			fit := m.fit(p, sum, t.Schema)
			if !fit.OK || (p == Anthropic && !budget.take(fit)) {
				plan.Results[i] = Unfit
				continue
			}
			plan.Results[i] = Marked
			plan.Mark = append(plan.Mark, t.Name)
		}
	}
	return plan
}

// planRequestWide marks all tools or none.
func (m *Memory) planRequestWide(p Provider, tools []Tool, plan Plan) Plan {
	all := Marked
	for _, t := range tools {
		sum := sha256.Sum256(t.Schema)
		switch {
		case t.Client:
			all = Client
		case all != Client && m.isRefused(p, t.Name, sum):
			all = Refused
		case all == Marked && !m.fit(p, sum, t.Schema).OK:
			all = Unfit
		}
	}
	for i, t := range tools {
		plan.Results[i] = all
		if all == Marked {
			plan.Mark = append(plan.Mark, t.Name)
		}
	}
	return plan
}

// anthropicBudget holds Anthropic's per-request limits across every
// strict tool of the request, the client's own included.
type anthropicBudget struct {
	tools, optional, unions int
}

// take adds a tool if it fits the remaining budget.
func (b *anthropicBudget) take(f Fit) bool {
	if b.tools+1 > anthropicMaxStrictTools || b.optional+f.Optional > anthropicMaxOptional ||
		b.unions+f.Unions > anthropicMaxUnions {
		return false
	}
	b.tools++
	b.optional += f.Optional
	b.unions += f.Unions
	return true
}

// fit is Check, computed once per schema text (sum is its hash) and
// provider.
func (m *Memory) fit(p Provider, sum [sha256.Size]byte, schema []byte) Fit {
	k := memoryKey{provider: p, sum: sum}
	m.mu.Lock()
	f, ok := m.fits[k]
	m.mu.Unlock()
	if ok {
		return f
	}
	f = Check(p, schema)
	m.mu.Lock()
	if len(m.fits) >= maxFits {
		clear(m.fits)
	}
	m.fits[k] = f
	m.mu.Unlock()
	return f
}

func (m *Memory) isRefused(p Provider, name string, sum [sha256.Size]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.refused[memoryKey{provider: p, name: name, sum: sum}]
	return ok
}

// Refuse remembers that the upstream refused t marked strict, so no later
// plan from this memory marks it again.
func (m *Memory) Refuse(p Provider, t Tool) {
	k := memoryKey{provider: p, name: t.Name, sum: sha256.Sum256(t.Schema)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.refused[k]; ok {
		return
	}
	if len(m.order) >= maxRefused {
		delete(m.refused, m.order[0])
		m.order = m.order[1:]
	}
	m.refused[k] = struct{}{}
	m.order = append(m.order, k)
}
