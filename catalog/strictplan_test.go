package catalog

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog/strict"
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
	tools := []strict.Tool{
		{Name: "fits", Schema: []byte(fitSchema)},
		{Name: "unfit", Schema: []byte(unfitSchema)},
		{Name: "mine", Schema: []byte(unfitSchema), Client: true},
		{Name: "none"},
	}
	plan := s.PlanStrict(strict.OpenAI, tools, false)
	if !reflect.DeepEqual(plan.Mark, []string{"fits"}) ||
		!reflect.DeepEqual(plan.Results, []strict.Result{strict.Marked, strict.Unfit, strict.Client, strict.Unfit}) {
		t.Fatalf("plan %+v", plan)
	}
	// The same tools give the same plan; a refusal takes the tool out
	// for this snapshot, under that provider only.
	if again := s.PlanStrict(strict.OpenAI, tools, false); !reflect.DeepEqual(again, plan) {
		t.Errorf("second plan %+v differs from %+v", again, plan)
	}
	s.RefuseStrict(strict.OpenAI, tools[0])
	plan = s.PlanStrict(strict.OpenAI, tools, false)
	if len(plan.Mark) != 0 || plan.Results[0] != strict.Refused {
		t.Errorf("after a refusal: %+v", plan)
	}
	if p := s.PlanStrict(strict.Anthropic, tools[:1], false); !reflect.DeepEqual(p.Mark, []string{"fits"}) {
		t.Errorf("a refusal under OpenAI kept Anthropic from marking: %+v", p)
	}
	// The same name with another schema is another tool.
	other := strict.Tool{Name: "fits", Schema: []byte(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)}
	if p := s.PlanStrict(strict.OpenAI, []strict.Tool{other}, false); len(p.Mark) != 1 {
		t.Errorf("a refusal of one schema kept another from marking: %+v", p)
	}
}

func TestPlanStrictRequestWide(t *testing.T) {
	s := strictSnapshot(t)
	fit := strict.Tool{Name: "a", Schema: []byte(fitSchema)}
	unfit := strict.Tool{Name: "b", Schema: []byte(unfitSchema)}
	if p := s.PlanStrict(strict.Gemini, []strict.Tool{fit, {Name: "c", Schema: []byte(fitSchema)}}, true); len(p.Mark) != 2 || p.Results[1] != strict.Marked {
		t.Errorf("all fit: %+v", p)
	}
	if p := s.PlanStrict(strict.Gemini, []strict.Tool{fit, unfit}, true); len(p.Mark) != 0 ||
		!reflect.DeepEqual(p.Results, []strict.Result{strict.Unfit, strict.Unfit}) {
		t.Errorf("one unfit: %+v", p)
	}
	client := strict.Tool{Name: "a", Schema: []byte(fitSchema), Client: true}
	if p := s.PlanStrict(strict.Gemini, []strict.Tool{client}, true); len(p.Mark) != 0 || p.Results[0] != strict.Client {
		t.Errorf("client mode: %+v", p)
	}
}

// TestPlanStrictAnthropicLimits: Anthropic counts strict tools, optional
// parameters and unions across the request; a tool past a limit is left
// unmarked, in request order, the client's own strict tools included.
func TestPlanStrictAnthropicLimits(t *testing.T) {
	s := strictSnapshot(t)
	var tools []strict.Tool
	for i := 0; i < 21; i++ {
		tools = append(tools, strict.Tool{Name: "t" + strconv.Itoa(i), Schema: []byte(fitSchema), Client: i == 0})
	}
	p := s.PlanStrict(strict.Anthropic, tools, false)
	if len(p.Mark) != 19 || p.Results[20] != strict.Unfit || p.Results[0] != strict.Client {
		t.Errorf("21 tools: marked %d, results %v", len(p.Mark), p.Results)
	}
	if p := s.PlanStrict(strict.OpenAI, tools, false); len(p.Mark) != 20 {
		t.Errorf("OpenAI has no such limit: marked %d", len(p.Mark))
	}
	optional := func(n int) strict.Tool {
		props := make([]string, n)
		for i := range props {
			props[i] = `"p` + strconv.Itoa(i) + `":{"type":"string"}`
		}
		return strict.Tool{Name: "o" + strconv.Itoa(n), Schema: []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":false}`)}
	}
	p = s.PlanStrict(strict.Anthropic, []strict.Tool{optional(20), optional(5), optional(4)}, false)
	if !reflect.DeepEqual(p.Mark, []string{"o20", "o4"}) {
		t.Errorf("optional budget: marked %v", p.Mark)
	}
}

// benchPlanSchema is a schema of the size agents send (as
// strict.BenchmarkCheckStrict's).
const benchPlanSchema = `{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_[a-z0-9]+$"},` +
	`"amount_cents":{"type":"integer","minimum":1},"currency":{"type":"string","enum":["EUR","USD","GBP"]},` +
	`"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":["string","null"]}},"required":["street","zip"],"additionalProperties":false},` +
	`"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku","qty"],"additionalProperties":false}}},` +
	`"required":["order_id","amount_cents","currency","address","items"],"additionalProperties":false}`

// BenchmarkPlanStrict is what a request with ten tools pays once their
// schemas are known: the plan, from the snapshot's cache.
func BenchmarkPlanStrict(b *testing.B) {
	c, err := Parse([]byte(minimalYAML+"catalog:\n  strict: auto\n"), "config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Compile(c, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tools := make([]strict.Tool, 10)
	for i := range tools {
		tools[i] = strict.Tool{Name: "t" + strconv.Itoa(i), Schema: []byte(benchPlanSchema)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.PlanStrict(strict.OpenAI, tools, false)
	}
}
