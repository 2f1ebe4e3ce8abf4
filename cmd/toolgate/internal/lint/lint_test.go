package lint

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
)

func snapshot(t *testing.T, tools string) *catalog.Snapshot {
	t.Helper()
	cfg, err := catalog.Parse([]byte("upstreams: [{url: 'http://127.0.0.1:1'}]\ncatalog:\n  tools:\n"+tools), "lint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCatalogWarnings(t *testing.T) {
	cases := []struct {
		name  string
		tools string
		want  []string
	}{
		{
			name: "clean catalog",
			tools: `
    - name: get_weather
      description: Current weather for a city, in degrees.
      parameters: {type: object, properties: {city: {type: string}}}
    - name: send_email
      description: Send an email message to one recipient.
      parameters: {type: object, properties: {to: {type: string}}}
`,
		},
		{
			name: "missing description",
			tools: `
    - name: get_weather
      parameters: {type: object}
`,
			want: []string{"tool get_weather has no description"},
		},
		{
			name: "near duplicate descriptions",
			tools: `
    - name: get_user
      description: Look up a user account by its id and return the profile.
    - name: fetch_user
      description: Look up a user account by its id and return the profile fields.
`,
			want: []string{"tools fetch_user and get_user have near-identical descriptions"},
		},
		{
			name: "provenance pointer the schema lacks",
			tools: `
    - name: get_order
      description: Look up an order.
      parameters: {type: object, properties: {order_id: {type: string}}}
      provenance: [/orderId, /order_id]
`,
			want: []string{"provenance pointer /orderId is not a property"},
		},
		{
			name: "rule reads an unknown argument",
			tools: `
    - name: refund
      description: Refund an order.
      parameters: {type: object, properties: {amount_cents: {type: integer}}}
      rules:
        - expr: "args.amount <= 100"
          message: too much
`,
			want: []string{`reads args.amount, which its schema does not define`},
		},
		{
			name: "arguments of earlier calls are not the call's own",
			tools: `
    - name: refund
      description: Refund an order.
      parameters: {type: object, properties: {order_id: {type: string}}}
      rules:
        - expr: "history.exists(h, h.args.query == args.order_id) && calls.all(c, c.args.note != '') && args['reason'] != ''"
          message: looked up
`,
			want: []string{`reads args.reason, which its schema does not define`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Catalog(snapshot(t, tc.tools))
			if len(got) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestSimilarity(t *testing.T) {
	if s := Similarity("a b c", "a b c"); s != 1 {
		t.Errorf("identical = %v", s)
	}
	if s := Similarity("alpha beta", "gamma delta"); s != 0 {
		t.Errorf("disjoint = %v", s)
	}
	if s := Similarity("", "x"); s != 0 {
		t.Errorf("empty = %v", s)
	}
}
