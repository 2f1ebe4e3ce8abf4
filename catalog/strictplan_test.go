package catalog

import (
	"crypto/sha256"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const (
	fitSchema   = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	unfitSchema = `{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"]}`
)

func strictSnapshot(t *testing.T) *Snapshot {
	t.Helper()
	c, err := Parse([]byte(minimalYAML+"catalog:\n  strict: auto\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStrictConfig(t *testing.T) {
	for _, v := range []string{"off", "auto"} {
		c, err := Parse([]byte(minimalYAML+"catalog:\n  strict: "+v+"\n"), "config.yaml")
		if err != nil || c.Catalog.Strict != v {
			t.Errorf("strict: %s read as %q (%v)", v, c.Catalog.Strict, err)
		}
	}
	_, err := Parse([]byte(minimalYAML+"catalog:\n  strict: on\n"), "config.yaml")
	if err == nil || !strings.Contains(err.Error(), "catalog.strict") {
		t.Errorf("strict: on accepted (%v), want an error naming catalog.strict", err)
	}
}

func TestPlanStrictPerTool(t *testing.T) {
	s := strictSnapshot(t)
	tools := []StrictTool{
		{Name: "fits", Schema: []byte(fitSchema)},
		{Name: "unfit", Schema: []byte(unfitSchema)},
		{Name: "mine", Schema: []byte(unfitSchema), Client: true},
		{Name: "none"},
	}
	plan := s.PlanStrict(StrictOpenAI, tools, false)
	if !reflect.DeepEqual(plan.Mark, []string{"fits"}) ||
		!reflect.DeepEqual(plan.Results, []StrictResult{StrictMarked, StrictUnfit, StrictClient, StrictUnfit}) {
		t.Fatalf("plan %+v", plan)
	}
	// The same tools give the same plan; a refusal takes the tool out
	// for this snapshot, under that provider only.
	if again := s.PlanStrict(StrictOpenAI, tools, false); !reflect.DeepEqual(again, plan) {
		t.Errorf("second plan %+v differs from %+v", again, plan)
	}
	s.RefuseStrict(StrictOpenAI, tools[0])
	plan = s.PlanStrict(StrictOpenAI, tools, false)
	if len(plan.Mark) != 0 || plan.Results[0] != StrictRefused {
		t.Errorf("after a refusal: %+v", plan)
	}
	if p := s.PlanStrict(StrictAnthropic, tools[:1], false); !reflect.DeepEqual(p.Mark, []string{"fits"}) {
		t.Errorf("a refusal under OpenAI kept Anthropic from marking: %+v", p)
	}
	// The same name with another schema is another tool.
	other := StrictTool{Name: "fits", Schema: []byte(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)}
	if p := s.PlanStrict(StrictOpenAI, []StrictTool{other}, false); len(p.Mark) != 1 {
		t.Errorf("a refusal of one schema kept another from marking: %+v", p)
	}
}

func TestPlanStrictRequestWide(t *testing.T) {
	s := strictSnapshot(t)
	fit := StrictTool{Name: "a", Schema: []byte(fitSchema)}
	unfit := StrictTool{Name: "b", Schema: []byte(unfitSchema)}
	if p := s.PlanStrict(StrictGemini, []StrictTool{fit, {Name: "c", Schema: []byte(fitSchema)}}, true); len(p.Mark) != 2 || p.Results[1] != StrictMarked {
		t.Errorf("all fit: %+v", p)
	}
	if p := s.PlanStrict(StrictGemini, []StrictTool{fit, unfit}, true); len(p.Mark) != 0 ||
		!reflect.DeepEqual(p.Results, []StrictResult{StrictUnfit, StrictUnfit}) {
		t.Errorf("one unfit: %+v", p)
	}
	client := StrictTool{Name: "a", Schema: []byte(fitSchema), Client: true}
	if p := s.PlanStrict(StrictGemini, []StrictTool{client}, true); len(p.Mark) != 0 || p.Results[0] != StrictClient {
		t.Errorf("client mode: %+v", p)
	}
}

// TestPlanStrictAnthropicLimits: Anthropic counts strict tools, optional
// parameters and unions across the request; a tool past a limit is left
// unmarked, in request order, the client's own strict tools included.
func TestPlanStrictAnthropicLimits(t *testing.T) {
	s := strictSnapshot(t)
	var tools []StrictTool
	for i := 0; i < 21; i++ {
		tools = append(tools, StrictTool{Name: "t" + strconv.Itoa(i), Schema: []byte(fitSchema), Client: i == 0})
	}
	p := s.PlanStrict(StrictAnthropic, tools, false)
	if len(p.Mark) != 19 || p.Results[20] != StrictUnfit || p.Results[0] != StrictClient {
		t.Errorf("21 tools: marked %d, results %v", len(p.Mark), p.Results)
	}
	if p := s.PlanStrict(StrictOpenAI, tools, false); len(p.Mark) != 20 {
		t.Errorf("OpenAI has no such limit: marked %d", len(p.Mark))
	}
	optional := func(n int) StrictTool {
		props := make([]string, n)
		for i := range props {
			props[i] = `"p` + strconv.Itoa(i) + `":{"type":"string"}`
		}
		return StrictTool{Name: "o" + strconv.Itoa(n), Schema: []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":false}`)}
	}
	p = s.PlanStrict(StrictAnthropic, []StrictTool{optional(20), optional(5), optional(4)}, false)
	if !reflect.DeepEqual(p.Mark, []string{"o20", "o4"}) {
		t.Errorf("optional budget: marked %v", p.Mark)
	}
}

func TestStrictMemoryIsBounded(t *testing.T) {
	s := strictSnapshot(t)
	first := StrictTool{Name: "first", Schema: []byte(fitSchema)}
	s.RefuseStrict(StrictOpenAI, first)
	for i := 0; i < maxStrictRefused; i++ {
		s.RefuseStrict(StrictOpenAI, StrictTool{Name: "t" + strconv.Itoa(i), Schema: []byte(fitSchema)})
	}
	m := s.strictMemory()
	if len(m.refused) != maxStrictRefused || len(m.order) != maxStrictRefused {
		t.Errorf("refused holds %d (order %d), want %d", len(m.refused), len(m.order), maxStrictRefused)
	}
	if s.strictRefused(StrictOpenAI, first.Name, sha256.Sum256(first.Schema)) {
		t.Error("the oldest refusal was kept past the bound")
	}
	for i := 0; i < maxStrictFits+10; i++ {
		schema := []byte(`{"type":"object","title":"` + strconv.Itoa(i) + `"}`)
		s.strictFit(StrictOpenAI, sha256.Sum256(schema), schema)
	}
	if len(m.fits) > maxStrictFits {
		t.Errorf("fits holds %d, bound %d", len(m.fits), maxStrictFits)
	}
}
