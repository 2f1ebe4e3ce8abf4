package catalog

import (
	"crypto/sha256"
	"sync"
)

// catalog.strict values (docs/strict.md).
const (
	StrictOff  = "off"
	StrictAuto = "auto"
)

// StrictResult says what became of one offered function tool: the
// toolgate_strict_tools_total result label.
type StrictResult string

// Strict results.
const (
	StrictMarked  StrictResult = "marked"
	StrictUnfit   StrictResult = "unfit"
	StrictClient  StrictResult = "client"
	StrictRefused StrictResult = "refused"
)

// StrictTool is one offered function tool as the plan needs it: its name,
// its parameter schema as the request declares it (what the provider will
// judge) and whether the client decided the flag itself.
type StrictTool struct {
	Name   string
	Schema []byte
	Client bool
}

// StrictPlan is what to ask of the provider for one request: the tools to
// mark, and a result for each offered tool in request order.
type StrictPlan struct {
	Mark    []string
	Results []StrictResult
}

// PlanStrict decides which of a request's function tools to mark strict.
// It depends only on the snapshot (its catalog version and what upstreams
// refused under it) and the tools, so the same tools are marked the same
// way on every request, and prompt caches keyed on them stay warm.
// perRequest is set where the flag is one for the whole request (Gemini's
// mode): then every tool must fit and none may be the client's.
func (s *Snapshot) PlanStrict(p StrictProvider, tools []StrictTool, perRequest bool) StrictPlan {
	plan := StrictPlan{Results: make([]StrictResult, len(tools))}
	if perRequest {
		return s.planRequestWide(p, tools, plan)
	}
	var budget anthropicBudget
	for i, t := range tools {
		sum := sha256.Sum256(t.Schema)
		switch {
		case t.Client:
			plan.Results[i] = StrictClient
			budget.take(s.strictFit(p, sum, t.Schema))
		case s.strictRefused(p, t.Name, sum):
			plan.Results[i] = StrictRefused
		default:
			fit := s.strictFit(p, sum, t.Schema)
			if !fit.OK || (p == StrictAnthropic && !budget.take(fit)) {
				plan.Results[i] = StrictUnfit
				continue
			}
			plan.Results[i] = StrictMarked
			plan.Mark = append(plan.Mark, t.Name)
		}
	}
	return plan
}

// planRequestWide marks all tools or none.
func (s *Snapshot) planRequestWide(p StrictProvider, tools []StrictTool, plan StrictPlan) StrictPlan {
	all := StrictMarked
	for _, t := range tools {
		sum := sha256.Sum256(t.Schema)
		switch {
		case t.Client:
			all = StrictClient
		case all != StrictClient && s.strictRefused(p, t.Name, sum):
			all = StrictRefused
		case all == StrictMarked && !s.strictFit(p, sum, t.Schema).OK:
			all = StrictUnfit
		}
	}
	for i, t := range tools {
		plan.Results[i] = all
		if all == StrictMarked {
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
func (b *anthropicBudget) take(f StrictFit) bool {
	if b.tools+1 > anthropicMaxStrictTools || b.optional+f.Optional > anthropicMaxOptional ||
		b.unions+f.Unions > anthropicMaxUnions {
		return false
	}
	b.tools++
	b.optional += f.Optional
	b.unions += f.Unions
	return true
}

// strictState is a snapshot's memory for strict mode: the verdicts on
// schemas already judged, and the tools an upstream refused to take
// strict. Both are bounded; a reload starts both afresh with the new
// catalog version.
type strictState struct {
	mu      sync.Mutex
	fits    map[strictKey]StrictFit
	refused map[strictKey]struct{}
	// order is refused's keys oldest first, to drop the oldest when full.
	order []strictKey
}

type strictKey struct {
	p    StrictProvider
	name string
	sum  [sha256.Size]byte
}

const (
	maxStrictFits    = 4096
	maxStrictRefused = 1024
)

func newStrictState() *strictState {
	return &strictState{fits: map[strictKey]StrictFit{}, refused: map[strictKey]struct{}{}}
}

// strictMemory is the snapshot's memory; one made other than by Compile
// has none, and then remembers nothing.
func (s *Snapshot) strictMemory() *strictState {
	if s.strict == nil {
		return newStrictState()
	}
	return s.strict
}

// strictFit is CheckStrict, computed once per schema text (sum is its
// hash) and provider.
func (s *Snapshot) strictFit(p StrictProvider, sum [sha256.Size]byte, schema []byte) StrictFit {
	m := s.strictMemory()
	k := strictKey{p: p, sum: sum}
	m.mu.Lock()
	f, ok := m.fits[k]
	m.mu.Unlock()
	if ok {
		return f
	}
	f = CheckStrict(p, schema)
	m.mu.Lock()
	if len(m.fits) >= maxStrictFits {
		clear(m.fits)
	}
	m.fits[k] = f
	m.mu.Unlock()
	return f
}

func (s *Snapshot) strictRefused(p StrictProvider, name string, sum [sha256.Size]byte) bool {
	m := s.strictMemory()
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.refused[strictKey{p: p, name: name, sum: sum}]
	return ok
}

// RefuseStrict remembers that the upstream refused t marked strict, so
// no later request under this catalog version marks it again.
func (s *Snapshot) RefuseStrict(p StrictProvider, t StrictTool) {
	m := s.strictMemory()
	k := strictKey{p: p, name: t.Name, sum: sha256.Sum256(t.Schema)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.refused[k]; ok {
		return
	}
	if len(m.order) >= maxStrictRefused {
		delete(m.refused, m.order[0])
		m.order = m.order[1:]
	}
	m.refused[k] = struct{}{}
	m.order = append(m.order, k)
}
