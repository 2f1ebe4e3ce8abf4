package recovery

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/toolgate/toolgate/catalog"
)

// catalogEntity is one kind of record a business system exposes, with the verbs
// its API offers for it.
type catalogEntity struct {
	domain string // what the system is, for descriptions
	one    string // singular, snake_case
	many   string // plural, snake_case
	verbs  string // g=get l=list c=create u=update d=delete s=search
}

// catalogEntities spans the domains an agent platform typically wires up,
// so that many tools share verbs and nouns the way real catalogs do.
var catalogEntities = []catalogEntity{
	{"the CRM", "contact", "contacts", "glcuds"},
	{"the CRM", "lead", "leads", "glcud"},
	{"the CRM", "account", "accounts", "glcu"},
	{"the CRM", "opportunity", "opportunities", "glcu"},
	{"billing", "invoice", "invoices", "glcud"},
	{"billing", "payment", "payments", "glc"},
	{"billing", "subscription", "subscriptions", "glcud"},
	{"billing", "credit_note", "credit_notes", "glc"},
	{"billing", "tax_rate", "tax_rates", "gl"},
	{"the calendar", "event", "events", "glcud"},
	{"the calendar", "meeting_room", "meeting_rooms", "gl"},
	{"the calendar", "reminder", "reminders", "lcd"},
	{"file storage", "file", "files", "glcds"},
	{"file storage", "folder", "folders", "glcd"},
	{"file storage", "share_link", "share_links", "lcd"},
	{"email", "draft", "drafts", "glcud"},
	{"email", "email_thread", "email_threads", "gls"},
	{"chat", "channel", "channels", "glc"},
	{"chat", "message", "messages", "lds"},
	{"identity", "user_role", "user_roles", "gl"},
	{"identity", "api_key", "api_keys", "lcd"},
	{"identity", "session", "sessions", "ld"},
	{"support", "ticket", "tickets", "glcus"},
	{"support", "ticket_comment", "ticket_comments", "lc"},
	{"inventory", "product", "products", "glcuds"},
	{"inventory", "stock_level", "stock_levels", "gu"},
	{"inventory", "warehouse", "warehouses", "gl"},
	{"inventory", "supplier", "suppliers", "glc"},
	{"shipping", "shipment", "shipments", "glc"},
	{"shipping", "shipping_label", "shipping_labels", "gc"},
	{"HR", "employee", "employees", "glcu"},
	{"HR", "leave_request", "leave_requests", "glc"},
	{"HR", "job_posting", "job_postings", "glc"},
	{"HR", "candidate", "candidates", "gls"},
	{"analytics", "report", "reports", "glc"},
	{"analytics", "dashboard", "dashboards", "gl"},
	{"DevOps", "deployment", "deployments", "glc"},
	{"DevOps", "build", "builds", "gl"},
	{"DevOps", "incident", "incidents", "glcu"},
	{"project management", "task", "tasks", "glcud"},
	{"project management", "project", "projects", "glc"},
	{"project management", "milestone", "milestones", "lc"},
	{"the shop", "order", "orders", "glcu"},
	{"the shop", "coupon", "coupons", "glc"},
	{"the shop", "cart", "carts", "g"},
}

// extraTools are single tools whose names do not follow the verb_noun grid.
var extraTools = [][2]string{
	{"get_weather", "Get the current weather conditions for a city: temperature, wind and precipitation."},
	{"get_weather_forecast", "Get the hourly and daily weather forecast for a location."},
	{"get_air_quality", "Get the air quality index and pollutant levels for a location."},
	{"get_weather_alerts", "List active severe weather alerts for a region."},
	{"get_user_details", "Get the profile details of one user account: name, email, roles and status."},
	{"update_user_profile", "Update the display name, avatar or locale of a user account."},
	{"reset_user_password", "Send a password reset link to a user."},
	{"send_email", "Send an email message to one or more recipients."},
	{"send_slack_message", "Post a message to a Slack channel or user."},
	{"geocode_address", "Turn a street address into latitude and longitude."},
	{"get_directions", "Get driving, walking or transit directions between two places."},
	{"find_nearby_places", "Find restaurants, shops and other places near a location."},
	{"convert_currency", "Convert an amount between two currencies at today's rate."},
	{"get_exchange_rate", "Get the exchange rate between two currencies."},
	{"translate_text", "Translate text into another language."},
	{"summarize_document", "Summarize a long document in a few sentences."},
	{"search_docs", "Full-text search over the help center articles."},
	{"run_sql_query", "Run a read-only SQL query against the analytics warehouse."},
	{"upload_file", "Upload a file to storage and return its id."},
	{"download_file", "Download the contents of a stored file."},
	{"move_file", "Move a file into another folder."},
	{"track_shipment", "Get the live tracking status of a shipment by tracking number."},
	{"calculate_shipping_rate", "Quote shipping rates for a parcel between two addresses."},
	{"issue_refund", "Refund part or all of a paid order."},
	{"cancel_subscription", "Cancel a customer's subscription at the end of the period."},
	{"apply_coupon", "Apply a coupon code to a shopping cart."},
	{"check_availability", "Check the free/busy availability of people for a meeting."},
	{"schedule_meeting", "Schedule a meeting with attendees at a given time."},
	{"assign_ticket", "Assign a support ticket to an agent or team."},
	{"escalate_incident", "Escalate an incident to the on-call engineer."},
	{"rollback_deployment", "Roll back a deployment to the previous version."},
	{"restart_server", "Restart an application server."},
	{"get_server_metrics", "Get CPU, memory and disk metrics of a server."},
	{"approve_leave_request", "Approve an employee's leave request."},
	{"run_payroll", "Run the payroll for a pay period."},
	{"export_report", "Export a report as CSV or PDF."},
	{"merge_contacts", "Merge two duplicate CRM contacts into one."},
	{"log_call", "Log a phone call with a CRM contact."},
	{"create_shopping_list", "Create a shopping list from recipe ingredients."},
	{"get_stock_quote", "Get the latest stock price for a ticker symbol."},
	{"get_news_headlines", "Get the top news headlines for a topic or country."},
	{"set_thermostat", "Set the target temperature of a smart thermostat."},
	{"turn_on_lights", "Turn on the lights in a room."},
	{"play_music", "Play a song, album or playlist."},
	{"book_flight", "Book a flight for a passenger."},
	{"search_flights", "Search flights between two airports on a date."},
	{"book_hotel", "Book a hotel room for given dates."},
	{"search_hotels", "Search hotels in a city for given dates."},
	{"get_recipe", "Get a cooking recipe by dish name."},
	{"create_calendar", "Create a new shared calendar."},
}

var verbDescriptions = map[byte]string{
	'g': "Get one %[1]s from %[3]s by its id.",
	'l': "List %[2]s in %[3]s, with filters and paging.",
	'c': "Create a new %[1]s in %[3]s.",
	'u': "Update fields of an existing %[1]s in %[3]s.",
	'd': "Delete a %[1]s from %[3]s.",
	's': "Search %[2]s in %[3]s by keyword.",
}

var verbPrefixes = map[byte]string{'g': "get", 'l': "list", 'c': "create", 'u': "update", 'd': "delete", 's': "search"}

// bigCatalog returns exactly 200 tools, in a shuffled but fixed order so the
// ranking cannot lean on catalog order.
func bigCatalog(t testing.TB) []*catalog.Tool {
	t.Helper()
	var tools []*catalog.Tool
	seen := map[string]bool{}
	add := func(name, desc string) {
		if seen[name] {
			t.Fatalf("duplicate tool %s", name)
		}
		seen[name] = true
		tools = append(tools, &catalog.Tool{Name: name, Description: desc, Substitutable: true, Policy: catalog.PolicyExecute})
	}
	for _, e := range catalogEntities {
		for i := 0; i < len(e.verbs); i++ {
			v := e.verbs[i]
			noun := e.one
			if v == 'l' || v == 's' {
				noun = e.many
			}
			add(verbPrefixes[v]+"_"+noun, fmt.Sprintf(verbDescriptions[v], strings.ReplaceAll(e.one, "_", " "), strings.ReplaceAll(e.many, "_", " "), e.domain))
		}
	}
	for _, x := range extraTools {
		add(x[0], x[1])
	}
	if len(tools) != 200 {
		t.Fatalf("catalog has %d tools, want 200", len(tools))
	}
	// A fixed permutation: stride through the list with a step coprime to 200.
	out := make([]*catalog.Tool, len(tools))
	for i := range tools {
		out[i] = tools[(i*77+13)%len(tools)]
	}
	return out
}

func toolNames(ts []*catalog.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestShortlistKnownRenames(t *testing.T) {
	tools := bigCatalog(t)
	tests := []struct {
		invented string
		args     string
		want     string
	}{
		{"get_user_detials", `{"user_id":"u_1"}`, "get_user_details"},
		{"fetch_weather", `{"city":"Paris"}`, "get_weather"},
		{"getWeather", `{"city":"Paris"}`, "get_weather"},
		{"list_invoice", `{"status":"open"}`, "list_invoices"},
		{"default_api:get_weather", `{"city":"Paris"}`, "get_weather"},
		{"functions.list_invoices", `{}`, "list_invoices"},
		{"GetUserDetails", ``, "get_user_details"},
		{"get-user-details", ``, "get_user_details"},
		{"retrieve_invoice", `{"invoice_id":"in_1"}`, "get_invoice"},
		{"lookup_contact", ``, "get_contact"},
		{"fetch_contact", ``, "get_contact"},
		{"remove_file", ``, "delete_file"},
		{"editTicket", ``, "update_ticket"},
		{"crm_create_contact", ``, "create_contact"},
		{"send_mail", `{"to":"a@b.c","subject":"hi"}`, "send_email"},
		{"trakc_shipment", ``, "track_shipment"},
		{"weather", ``, "get_weather"},
	}
	for _, tc := range tests {
		t.Run(tc.invented, func(t *testing.T) {
			got := Shortlist(tools, tc.invented, []byte(tc.args), "", 5)
			if len(got) != 5 {
				t.Fatalf("got %d tools", len(got))
			}
			if got[0].Name != tc.want {
				t.Errorf("top 5 for %q = %v, want %q first", tc.invented, toolNames(got), tc.want)
			}
		})
	}
}

// TestShortlistAmbiguousVerb: "fetch" on a plural could mean get or list;
// the ranking cannot know, so both must make the shortlist.
func TestShortlistAmbiguousVerb(t *testing.T) {
	got := toolNames(Shortlist(bigCatalog(t), "fetch_contacts", nil, "", 5))
	for _, want := range []string{"get_contact", "list_contacts"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("top 5 %v lacks %s", got, want)
		}
	}
}

func TestShortlistDeterministic(t *testing.T) {
	tools := bigCatalog(t)
	first := toolNames(Shortlist(tools, "fetch_weather", []byte(`{"city":"Paris"}`), "what is the weather in Paris", 20))
	for i := 0; i < 20; i++ {
		// A different catalog order must not change the answer either.
		shuffled := append([]*catalog.Tool(nil), tools...)
		for j := range shuffled {
			k := (j*31 + i*7) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		got := toolNames(Shortlist(shuffled, "fetch_weather", []byte(`{"city":"Paris"}`), "what is the weather in Paris", 20))
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d: %v, want %v", i, got, first)
		}
	}
}

func TestShortlistEdges(t *testing.T) {
	tools := bigCatalog(t)
	small := tools[:3]
	tests := []struct {
		name  string
		tools []*catalog.Tool
		n     int
		want  int
	}{
		{"n covers all", small, 3, 3},
		{"n above all", small, 10, 3},
		{"n of one", tools, 1, 1},
		{"n of twenty", tools, 20, 20},
		{"empty catalog", nil, 5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Shortlist(tc.tools, "anything", nil, "", tc.n)
			if len(got) != tc.want {
				t.Errorf("len = %d, want %d", len(got), tc.want)
			}
			seen := map[string]bool{}
			for _, g := range got {
				if seen[g.Name] {
					t.Errorf("%s listed twice", g.Name)
				}
				seen[g.Name] = true
			}
		})
	}
	t.Run("nothing in common still fills n by name", func(t *testing.T) {
		got := Shortlist(tools, "zzzz", nil, "", 3)
		if len(got) != 3 {
			t.Fatalf("len = %d", len(got))
		}
	})
	t.Run("odd input does not panic", func(t *testing.T) {
		for _, name := range []string{"", "_", "::", "ÄÖÜ", "a", "\xff\xfe", strings.Repeat("x", 10000), "getURLForID"} {
			_ = Shortlist(tools, name, []byte(`{"a":{"b":[1,"}"]},"c\"d":1`), "ü \xff", 5)
		}
	})
	t.Run("user text and argument keys break ties", func(t *testing.T) {
		got := Shortlist(tools, "do_it", []byte(`{"ticker":"AAPL"}`), "what is the stock price of Apple", 3)
		if got[0].Name != "get_stock_quote" {
			t.Errorf("got %v", toolNames(got))
		}
	})
}

// renames applies one realistic way a model garbles a real tool name.
var renames = []struct {
	kind  string
	apply func(name string) (string, bool)
}{
	{"namespace added", func(n string) (string, bool) { return "default_api:" + n, true }},
	{"functions namespace added", func(n string) (string, bool) { return "functions." + n, true }},
	{"domain namespace added", func(n string) (string, bool) { return "api_" + n, true }},
	{"verb synonym", verbSynonym},
	{"camelCase", func(n string) (string, bool) { return camel(n, false), strings.Contains(n, "_") }},
	{"PascalCase", func(n string) (string, bool) { return camel(n, true), true }},
	{"kebab-case", func(n string) (string, bool) { return strings.ReplaceAll(n, "_", "-"), strings.Contains(n, "_") }},
	{"two letters transposed", transpose},
	{"plural/singular switched", pluralSwitch},
	{"verb dropped", func(n string) (string, bool) {
		i := strings.IndexByte(n, '_')
		return n[i+1:], i > 0 && strings.Count(n, "_") >= 2
	}},
}

var synonyms = map[string][]string{
	"get":    {"fetch", "retrieve", "lookup", "read"},
	"list":   {"fetch", "get_all", "retrieve"},
	"search": {"find", "query"},
	"create": {"add", "new", "make"},
	"update": {"edit", "modify", "change"},
	"delete": {"remove", "destroy"},
}

func verbSynonym(n string) (string, bool) {
	verb, rest, ok := strings.Cut(n, "_")
	if !ok {
		return "", false
	}
	syn := synonyms[verb]
	if len(syn) == 0 {
		return "", false
	}
	// Pick by the name so each tool gets one synonym, varied across tools.
	return syn[len(n)%len(syn)] + "_" + rest, true
}

func camel(n string, upperFirst bool) string {
	var b strings.Builder
	for i, part := range strings.Split(n, "_") {
		if part == "" {
			continue
		}
		if i > 0 || upperFirst {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		} else {
			b.WriteString(part)
		}
	}
	return b.String()
}

// transpose swaps two adjacent letters in the longest word, where typos hurt
// most and the verb stays intact.
func transpose(n string) (string, bool) {
	parts := strings.Split(n, "_")
	best := 0
	for i, p := range parts {
		if len(p) > len(parts[best]) {
			best = i
		}
	}
	p := []byte(parts[best])
	if len(p) < 5 {
		return "", false
	}
	i := len(p) / 2
	if p[i] == p[i+1] {
		i--
	}
	p[i], p[i+1] = p[i+1], p[i]
	parts[best] = string(p)
	return strings.Join(parts, "_"), true
}

func pluralSwitch(n string) (string, bool) {
	switch {
	case strings.HasSuffix(n, "ies"):
		return n[:len(n)-3] + "y", true
	case strings.HasSuffix(n, "ses") || strings.HasSuffix(n, "xes"):
		return n[:len(n)-2], true
	case strings.HasSuffix(n, "s") && !strings.HasSuffix(n, "ss"):
		return n[:len(n)-1], true
	case strings.HasSuffix(n, "y"):
		return n[:len(n)-1] + "ies", true
	default:
		return n + "s", true
	}
}

// TestShortlistHitRate measures how often the real tool behind a garbled
// name is ranked first and within the top five of a 200-tool catalog, from
// the name alone (no arguments, no user text: the hardest case).
func TestShortlistHitRate(t *testing.T) {
	tools := bigCatalog(t)
	byName := map[string]bool{}
	for _, tl := range tools {
		byName[tl.Name] = true
	}
	sorted := toolNames(tools)
	sort.Strings(sorted)

	type miss struct{ invented, want, kind string }
	var total, top1, top5 int
	var misses []miss
	perKind := map[string][3]int{} // top-5 hits, names, top-1 hits
	// Every fourth tool, each garbled every way that applies: a fixed
	// sample that still covers every domain.
	for i := 0; i < len(sorted); i += 4 {
		want := sorted[i]
		for _, r := range renames {
			inv, ok := r.apply(want)
			if !ok || inv == want || byName[inv] {
				continue
			}
			total++
			got := Shortlist(tools, inv, nil, "", 5)
			k := perKind[r.kind]
			k[1]++
			if got[0].Name == want {
				top1++
				k[2]++
			}
			hit := false
			for _, g := range got {
				if g.Name == want {
					hit = true
				}
			}
			if hit {
				top5++
				k[0]++
			} else {
				misses = append(misses, miss{inv, want, r.kind})
			}
			perKind[r.kind] = k
		}
	}
	if total < 100 {
		t.Fatalf("only %d renamed names", total)
	}
	r1, r5 := float64(top1)/float64(total), float64(top5)/float64(total)
	t.Logf("shortlist over %d tools, %d renamed names: top-1 %.3f (%d), top-5 %.3f (%d)", len(tools), total, r1, top1, r5, top5)
	kinds := make([]string, 0, len(perKind))
	for k := range perKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("  %-26s top-1 %d/%d, top-5 %d/%d", k, perKind[k][2], perKind[k][1], perKind[k][0], perKind[k][1])
	}
	for _, m := range misses {
		t.Logf("  miss (%s): %s -> want %s, got %v", m.kind, m.invented, m.want, toolNames(Shortlist(tools, m.invented, nil, "", 5)))
	}
	if r5 < 0.9 {
		t.Errorf("top-5 hit rate %.3f < 0.9", r5)
	}
}

// TestTokens pins the name splitting the ranking rests on.
func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"get_user_details", []string{"get", "user", "detail"}},
		{"getUserDetails", []string{"get", "user", "detail"}},
		{"get-user-details", []string{"get", "user", "detail"}},
		{"default_api:get_weather", []string{"default", "api", "get", "weather"}},
		{"list_companies", []string{"list", "company"}},
		{"boxes", []string{"box"}},
		{"class", []string{"class"}},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := tokens(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tokens(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, w := range got {
				for _, r := range w {
					if unicode.IsUpper(r) {
						t.Errorf("token %q is not lower case", w)
					}
				}
			}
		})
	}
}

func TestArgKeys(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`{"city":"Paris","unit":"c"}`, []string{"city", "unit"}},
		{`{"userId": 1, "nested": {"inner": 2}}`, []string{"user", "id", "nested"}},
		{`{"a":"key:","b":["x","y"]}`, []string{"a", "b"}},
		{`{"esc\"aped":1}`, []string{"esc", "aped"}},
		{`not json`, nil},
		{``, nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := argKeys([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("argKeys(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzShortlist: any invented name, argument text and user message gives n
// distinct catalog tools, the same ones every time.
func FuzzShortlist(f *testing.F) {
	f.Add("get_user_detials", []byte(`{"user_id":"u1"}`), "show me the user")
	f.Add("default_api:getWeather", []byte(`{"city":`), "")
	f.Add("", []byte(nil), "\xff\xfe")
	f.Add("ｇｅｔ＿ｗｅａｔｈｅｒ", []byte(`{"ключ":1}`), "погода")
	tools := bigCatalog(f)
	f.Fuzz(func(t *testing.T, name string, args []byte, userText string) {
		a := Shortlist(tools, name, args, userText, 7)
		b := Shortlist(tools, name, args, userText, 7)
		if len(a) != 7 || !reflect.DeepEqual(toolNames(a), toolNames(b)) {
			t.Fatalf("not deterministic or wrong size: %v vs %v", toolNames(a), toolNames(b))
		}
		seen := map[string]bool{}
		for _, tl := range a {
			if seen[tl.Name] {
				t.Fatalf("%s twice in %v", tl.Name, toolNames(a))
			}
			seen[tl.Name] = true
		}
	})
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"detail", "detail", 1, 0},
		{"detial", "detail", 1, 1},
		{"detai", "detail", 1, 1},
		{"detaill", "detail", 1, 1},
		{"detoil", "detail", 1, 1},
		{"dteial", "detail", 1, 2},
		{"dteial", "detail", 2, 2},
		{"abc", "xyz", 1, 2},
		{"", "ab", 1, 2},
		{"", "a", 1, 1},
		{"subscrpitions", "subscriptions", 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.a+"_"+tc.b, func(t *testing.T) {
			if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
				t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
			}
		})
	}
}
