package catalog

import (
	"strings"
	"testing"
	"time"
)

const confirmTool = "catalog: {tools: [{name: issue_refund, policy: confirm}]}\n"

func TestApprovalsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimalYAML+"catalog: {tools: [{name: a, policy: confirm}, {name: b}, {name: c, policy: confirm, approver: caller}]}\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Approvals.Store != "memory" || c.Approvals.TTL.D() != 15*time.Minute {
		t.Errorf("approvals = %+v", c.Approvals)
	}
	got := []string{c.Catalog.Tools[0].Approver, c.Catalog.Tools[1].Approver, c.Catalog.Tools[2].Approver}
	if strings.Join(got, ",") != "operator,,caller" {
		t.Errorf("approvers = %q: a confirm tool defaults to operator, others have none", got)
	}
}

func TestApprovalsRejects(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"unknown store":          {minimalYAML + "approvals: {store: postgres://x}\n", `approvals.store: line 2: "postgres://x" is not one of memory, file:PATH, redis://HOST:PORT/DB`},
		"file without path":      {minimalYAML + "approvals: {store: 'file:'}\n", "approvals.store"},
		"redis credentials":      {minimalYAML + "approvals: {store: 'redis://u:p@h:6379/0'}\n", "credentials"},
		"redis bad db":           {minimalYAML + "approvals: {store: 'redis://h:6379/x'}\n", "database number"},
		"ttl too short":          {minimalYAML + "approvals: {ttl: 500ms}\n", "approvals.ttl: line 2: must be between 1s and 168h0m0s, got 500ms"},
		"ttl too long":           {minimalYAML + "approvals: {ttl: 200h}\n", "approvals.ttl"},
		"notify not a URL":       {minimalYAML + "approvals: {notify: 'hooks.example/x'}\n", "approvals.notify"},
		"notify secret alone":    {minimalYAML + "approvals: {notify_secret_env: S}\n", "approvals.notify_secret_env: line 2: is set but approvals.notify is empty"},
		"unknown approver":       {minimalYAML + "catalog: {tools: [{name: a, policy: confirm, approver: user}]}\n", `catalog.tools[0].approver: line 2: "user" is not one of operator, caller`},
		"approver on execute":    {minimalYAML + "catalog: {tools: [{name: a, approver: caller}]}\n", `catalog.tools[0].approver: line 2: applies only to a tool with policy: confirm; "a" has policy: execute`},
		"unknown approvals key":  {minimalYAML + "approvals: {stor: memory}\n", "approvals.stor"},
		"unknown notify format":  {minimalYAML + "approvals: {notify: 'https://hooks.example/x', notify_format: teams}\n", `approvals.notify_format: line 2: "teams" is not one of json, slack`},
		"slack signed":           {minimalYAML + "approvals: {notify: 'https://hooks.example/x', notify_format: slack, notify_secret_env: S}\n", "approvals.notify_secret_env: line 2: is set but notify_format is slack"},
		"page_url not a URL":     {minimalYAML + "approvals: {page_url: 'ops.example/ui/approvals'}\n", "approvals.page_url"},
		"page_url with userinfo": {minimalYAML + "approvals: {page_url: 'https://u:p@ops.example/ui/approvals'}\n", "approvals.page_url"},
		"exposed admin without token": {"admin_listen: 0.0.0.0:9091\n" + minimalYAML + confirmTool,
			`approvals.admin_token_env: required because admin_listen "0.0.0.0:9091" is not a loopback address`},
		"exposed admin, MCP confirm_destructive": {"admin_listen: 10.0.0.5:9091\n" + minimalYAML +
			"mcp_servers: [{name: o, url: 'http://127.0.0.1:9400/mcp', path_prefix: /mcp/o}]\ncatalog: {mcp: {confirm_destructive: true}}\n",
			"approvals.admin_token_env: required"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "config.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestApprovalsAccepts(t *testing.T) {
	for name, y := range map[string]string{
		"file store":                        minimalYAML + "approvals: {store: 'file:/var/lib/toolgate/approvals.db', ttl: 1h}\n",
		"redis store":                       minimalYAML + "approvals: {store: 'redis://cache:6379/2'}\n",
		"notify signed":                     minimalYAML + "approvals: {notify: 'https://hooks.example/approvals', notify_secret_env: S}\n",
		"caller approver":                   minimalYAML + "catalog: {tools: [{name: a, policy: confirm, approver: caller}]}\n",
		"exposed admin with token":          "admin_listen: 0.0.0.0:9091\n" + minimalYAML + confirmTool + "approvals: {admin_token_env: ADMIN}\n",
		"exposed admin, nothing to approve": "admin_listen: 0.0.0.0:9091\n" + minimalYAML,
		"loopback admin without token":      "admin_listen: 127.0.0.1:9091\n" + minimalYAML + confirmTool,
		"exposed admin with named tokens":   "admin_listen: 0.0.0.0:9091\n" + minimalYAML + confirmTool + "approvals: {admin_tokens_env: ADMINS}\n",
		"slack notify with a page":          minimalYAML + "approvals: {notify: 'https://hooks.slack.example/T/B/x', notify_format: slack, page_url: 'https://ops.example/ui/approvals'}\n",
		"approver on an MCP tool made confirm by its hint": minimalYAML +
			"mcp_servers: [{name: o, url: 'http://127.0.0.1:9400/mcp', path_prefix: /mcp/o}]\ncatalog: {mcp: {confirm_destructive: true}, tools: [{name: o/delete, approver: caller}]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(y), "config.yaml"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestApprovalsSecretsAndApprover(t *testing.T) {
	y := minimalYAML + "catalog: {tools: [{name: a, policy: confirm, approver: caller}, {name: b, policy: confirm}]}\n" +
		"approvals: {admin_token_env: ADMIN, notify: 'https://hooks.example/a', notify_secret_env: NOTE}\n"
	s, err := compileYAML(t, y, nil, map[string]string{"ADMIN": " adm1n\n", "NOTE": "n0te"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Secrets.ApprovalsAdminToken != "adm1n" || s.Secrets.ApprovalsNotifySecret != "n0te" {
		t.Errorf("secrets = %q, %q", s.Secrets.ApprovalsAdminToken, s.Secrets.ApprovalsNotifySecret)
	}
	if a, b := s.Tools["a"], s.Tools["b"]; a == nil || b == nil || a.Approver != ApproverCaller || b.Approver != ApproverOperator {
		t.Errorf("compiled approvers: %+v %+v", a, b)
	}
	_, err = compileYAML(t, y, nil, map[string]string{"NOTE": "n0te"})
	if err == nil || !strings.Contains(err.Error(), "approvals.admin_token_env") || !strings.Contains(err.Error(), "environment variable ADMIN is not set or empty") {
		t.Fatalf("unset admin token: %v", err)
	}
	_, err = compileYAML(t, y, nil, map[string]string{"ADMIN": "a", "NOTE": "  "})
	if err == nil || !strings.Contains(err.Error(), "approvals.notify_secret_env") || !strings.Contains(err.Error(), "environment variable NOTE is not set or empty") {
		t.Fatalf("blank notify secret: %v", err)
	}
}

// TestApproverAndVersion: a caller approver changes the catalog version
// (it changes who may release a call); the default one does not, so
// catalogs written before approvers keep their versions.
func TestApproverAndVersion(t *testing.T) {
	base := minimalYAML + "catalog: {tools: [{name: a, policy: confirm}]}\n"
	v0 := mustCompileYAML(t, base).Version
	if v := mustCompileYAML(t, minimalYAML+"catalog: {tools: [{name: a, policy: confirm, approver: operator}]}\n").Version; v != v0 {
		t.Errorf("an explicit default approver changed the version: %s vs %s", v, v0)
	}
	if v := mustCompileYAML(t, minimalYAML+"catalog: {tools: [{name: a, policy: confirm, approver: caller}]}\n").Version; v == v0 {
		t.Error("a caller approver kept the version")
	}
}

func TestApprovalsNamedTokens(t *testing.T) {
	y := minimalYAML + confirmTool + "approvals: {admin_tokens_env: ADMINS}\n"
	s, err := compileYAML(t, y, nil, map[string]string{"ADMINS": " ana:t0k-a , bob@example.com:t0k-b,"})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Secrets.ApprovalsAdminTokens
	if len(got) != 2 || got[0] != (NamedToken{"ana", "t0k-a"}) || got[1] != (NamedToken{"bob@example.com", "t0k-b"}) {
		t.Fatalf("named tokens = %+v", got)
	}
	for env, want := range map[string]string{
		"":                     "environment variable ADMINS holds no name:token entries",
		"ana":                  "entry 1 is not name:token",
		"ana:":                 "entry 1 is not name:token",
		"ana:x,ana:y":          `entry 2: the name "ana" is given twice`,
		"ana:x,bob:x":          "entry 2: its token is another entry's too",
		"a na:x":               "entry 1: the name must be",
		"ok:t,bad|name:secret": "entry 2: the name must be",
	} {
		_, err := compileYAML(t, y, nil, map[string]string{"ADMINS": env})
		if err == nil || !strings.Contains(err.Error(), "approvals.admin_tokens_env") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", env, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || env == "ana:x,bob:x" && strings.Contains(err.Error(), ":x")) {
			t.Errorf("%q: the error shows a token: %v", env, err)
		}
	}
}

// FuzzNamedTokens: any admin_tokens_env value is read without a panic;
// what is accepted has valid, distinct names and distinct, non-empty
// tokens, and a problem never quotes a token.
func FuzzNamedTokens(f *testing.F) {
	for _, s := range []string{"ana:t0k", " ana:a , bob:b,", "ana", ":x", "ana:x,ana:y", "a:x,b:x", "a:b:c", "\x00:\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		ps := &problems{}
		got := namedTokens(ps, func(string) (string, bool) { return env, true }, "ADMINS")
		names, toks := map[string]bool{}, map[string]bool{}
		for _, n := range got {
			if !tokenName.MatchString(n.Name) || n.Token == "" || names[n.Name] || toks[n.Token] {
				t.Fatalf("accepted %+v from %q", n, env)
			}
			names[n.Name], toks[n.Token] = true, true
		}
		if len(got) == 0 && len(ps.list) == 0 {
			t.Fatalf("%q: no tokens and no problem", env)
		}
		for _, p := range ps.list {
			for _, entry := range strings.Split(env, ",") {
				if _, tok, ok := strings.Cut(entry, ":"); ok && len(strings.TrimSpace(tok)) > 3 && strings.Contains(p.Message, strings.TrimSpace(tok)) {
					t.Fatalf("problem %q quotes a token of %q", p.Message, env)
				}
			}
		}
	})
}
