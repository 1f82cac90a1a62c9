package jsonpath

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    string // the elements, joined
		wantErr string
	}{
		{name: "dotted", give: "$.data.errorRate", want: ".data.errorRate"},
		{name: "index", give: "$.a.b[0].c", want: ".a.b[0].c"},
		{name: "no dollar", give: "data.errorRate", want: ".data.errorRate"},
		{name: "quoted member", give: `$["error-rate"]['x.y']`, want: ".error-rate.x.y"},
		{name: "root", give: "$", want: ""},
		{name: "leading index", give: "$[2]", want: "[2]"},
		{name: "empty member", give: "$.a..b", wantErr: "empty member name"},
		{name: "unclosed", give: "$.a[0", wantErr: "'[' without ']'"},
		{name: "negative index", give: "$.a[-1]", wantErr: "neither an index"},
		{name: "wildcard", give: "$.a[*]", wantErr: "neither an index"},
		{name: "garbage after index", give: "$.a[0]b", wantErr: `unexpected "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.give)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tt.give, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.give, err)
			}
			var got strings.Builder
			for _, e := range p.elems {
				got.WriteString(e.String())
			}
			if got.String() != tt.want {
				t.Errorf("Parse(%q) = %q, want %q", tt.give, got.String(), tt.want)
			}
		})
	}
}

func TestNumber(t *testing.T) {
	const doc = `{"data":{"errorRate":0.02,"results":[{"value":"0.25"},{"value":7}],"none":null,"s":"abc","ok":true,"big":1e3}}`
	tests := []struct {
		name      string
		give      string
		doc       string
		want      float64
		wantFound bool
		wantErr   string
	}{
		{name: "number", give: "$.data.errorRate", want: 0.02, wantFound: true},
		{name: "array element", give: "$.data.results[1].value", want: 7, wantFound: true},
		{name: "numeric string", give: "$.data.results[0].value", want: 0.25, wantFound: true},
		{name: "exponent", give: "$.data.big", want: 1000, wantFound: true},
		{name: "bare number document", give: "$", doc: "42", want: 42, wantFound: true},
		{name: "missing member", give: "$.data.latency"},
		{name: "index past the end", give: "$.data.results[5].value"},
		{name: "null", give: "$.data.none"},
		{name: "through null", give: "$.data.none.x"},
		{name: "not a number", give: "$.data.s", wantErr: `the string "abc" is not a number`},
		{name: "boolean", give: "$.data.ok", wantErr: "is a boolean, not a number"},
		{name: "object", give: "$.data", wantErr: "is a object, not a number"},
		{name: "index into object", give: "$.data[0]", wantErr: "[0] indexes an object"},
		{name: "member of array", give: "$.data.results.value", wantErr: ".value names a member of an array"},
		{name: "into a number", give: "$.data.errorRate.x", wantErr: ".x goes into a number"},
		{name: "not json", give: "$.a", doc: "<html>", wantErr: "answer is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			d := tt.doc
			if d == "" {
				d = doc
			}
			got, found, err := p.Number([]byte(d))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Number(%s) error = %v, want one containing %q", tt.give, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Number(%s): %v", tt.give, err)
			}
			if got != tt.want || found != tt.wantFound {
				t.Errorf("Number(%s) = %g, %t; want %g, %t", tt.give, got, found, tt.want, tt.wantFound)
			}
		})
	}
}
