package agent

import (
	"strings"
	"testing"
)

func TestFilterMatch(t *testing.T) {
	rec := func(method, custom string, ns ...string) *record {
		return &record{method: method, custom: custom, ns: ns}
	}
	cases := []struct {
		filter string
		rec    *record
		want   bool
	}{
		{`{"channels":["messages"]}`, rec(methodMessages, ""), true},
		{`{"channels":["messages"]}`, rec(methodTools, ""), false},
		{`{"channels":["input"]}`, rec(methodInputRequested, ""), true},
		{`{"channels":["input"]}`, rec(methodInputAnswered, ""), true},
		{`{"channels":["custom"]}`, rec(methodCustom, "progress"), true},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, "progress"), true},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, "other"), false},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, ""), false},
		// rule 2: no namespaces: all, depth ignored
		{`{"channels":["messages"],"depth":0}`, rec(methodMessages, "", "a", "b", "c"), true},
		// rule 3: prefix with segment normalisation
		{`{"channels":["messages"],"namespaces":[["fetcher"]]}`, rec(methodMessages, "", "fetcher:uuid-1"), true},
		{`{"channels":["messages"],"namespaces":[["fetcher:abc"]]}`, rec(methodMessages, "", "fetcher:uuid-1"), false},
		{`{"channels":["messages"],"namespaces":[["fetcher:abc"]]}`, rec(methodMessages, "", "fetcher:abc", "x"), true},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":1}`, rec(methodMessages, "", "a", "b"), true},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":1}`, rec(methodMessages, "", "a", "b", "c"), false},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":0}`, rec(methodMessages, "", "a"), true},
		// rule 4: root events do not match a non-root prefix
		{`{"channels":["lifecycle"],"namespaces":[["gp_two"]]}`, rec(methodLifecycle, ""), false},
		{`{"channels":["lifecycle"],"namespaces":[[],["gp_two"]]}`, rec(methodLifecycle, ""), true},
		{`{"channels":["lifecycle"],"namespaces":[[]],"depth":0}`, rec(methodLifecycle, "", "child"), false},
	}
	for i, c := range cases {
		p, _ := parseParams([]byte(c.filter))
		f, pe := parseFilter(p, "test")
		if pe != nil {
			t.Fatalf("%d: %v", i, pe)
		}
		if got := f.match(c.rec); got != c.want {
			t.Errorf("%d: %s on %s %v: got %v", i, c.filter, c.rec.method, c.rec.ns, got)
		}
	}
}

func TestFilterErrorsNameTheField(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                                "requires a non-empty channels array",
		`{"channels":[]}`:                   "requires a non-empty channels array",
		`{"channels":"messages"}`:           "channels must be an array of strings",
		`{"channels":["messages","bogus"]}`: `channels[1] "bogus" is an unsupported channel`,
		`{"channels":["custom:"]}`:          `channels[0] "custom:" is an unsupported channel`,
		`{"channels":["messages"],"namespaces":[1]}`: "namespaces must be an array of namespaces",
		`{"channels":["messages"],"depth":-1}`:       "depth must be a non-negative integer",
		`{"channels":["messages"],"depth":true}`:     "depth must be a non-negative integer",
		`{"channels":["messages"],"depth":1.5}`:      "depth must be a non-negative integer",
	} {
		p, _ := parseParams([]byte(body))
		_, pe := parseFilter(p, "subscription.subscribe")
		if pe == nil || pe.Code != errInvalidArgument || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: got %v, want invalid_argument with %q", body, pe, want)
		}
	}
}

func TestCamelCaseAliases(t *testing.T) {
	p, ok := parseParams([]byte(`{"assistantId":"a","interruptId":"i","interrupt_id":"snake","multitaskStrategy":"reject"}`))
	if !ok {
		t.Fatal("not parsed")
	}
	for k, want := range map[string]string{"assistant_id": "a", "interrupt_id": "snake", "multitask_strategy": "reject"} {
		if got, _, _ := p.str(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
