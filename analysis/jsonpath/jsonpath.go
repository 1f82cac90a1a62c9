// Package jsonpath reads one number out of a JSON document by a simple dotted path, the subset
// of JSONPath a web analysis step needs:
//
//	$.data.errorRate          object members
//	$.data.results[0].value   array elements, 0-based
//	$["error-rate"]           members whose names are not identifiers
//	data.errorRate            the leading "$" (and "$.") may be left out
//
// No filters, wildcards, slices or recursive descent. It is pure: the workflow validates paths
// with it, and the web analysis evaluates them.
package jsonpath

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Path is a parsed path: a list of member names and array indexes.
type Path struct {
	raw   string
	elems []elem
}

type elem struct {
	name  string
	index int // -1 for a member name
}

// String is the path as written.
func (p Path) String() string { return p.raw }

// Parse reads a path. An empty path, or "$", is the whole document.
func Parse(s string) (Path, error) {
	p := Path{raw: s}
	rest := strings.TrimSpace(s)
	rest = strings.TrimPrefix(rest, "$")
	first := true
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			n := nameEnd(rest)
			if n == 0 {
				return Path{}, fmt.Errorf("json path %q: empty member name after '.'", s)
			}
			p.elems = append(p.elems, elem{name: rest[:n], index: -1})
			rest = rest[n:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return Path{}, fmt.Errorf("json path %q: '[' without ']'", s)
			}
			in := strings.TrimSpace(rest[1:end])
			rest = rest[end+1:]
			if len(in) >= 2 && (in[0] == '"' || in[0] == '\'') && in[len(in)-1] == in[0] {
				p.elems = append(p.elems, elem{name: in[1 : len(in)-1], index: -1})
				continue
			}
			i, err := strconv.Atoi(in)
			if err != nil || i < 0 {
				return Path{}, fmt.Errorf("json path %q: [%s] is neither an index (0, 1, ...) nor a quoted member name", s, in)
			}
			p.elems = append(p.elems, elem{index: i})
		case first:
			// "data.errorRate": a path without the leading "$.".
			n := nameEnd(rest)
			if n == 0 {
				return Path{}, fmt.Errorf("json path %q: unexpected %q", s, rest[:1])
			}
			p.elems = append(p.elems, elem{name: rest[:n], index: -1})
			rest = rest[n:]
		default:
			return Path{}, fmt.Errorf("json path %q: unexpected %q; want '.name' or '[index]'", s, rest[:1])
		}
		first = false
	}
	return p, nil
}

// nameEnd is the length of the member name at the start of s: up to the next '.' or '['.
func nameEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' || s[i] == '[' || s[i] == ']' {
			return i
		}
	}
	return len(s)
}

// Number evaluates the path on a JSON document and returns the number there. found is false
// when the path leads nowhere (a missing member, an index past the end, a null): no data. A
// value that is there but not a number is an error; a string holding a number ("0.25", as
// Prometheus' API writes values) is read as that number.
func (p Path) Number(doc []byte) (value float64, found bool, err error) {
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, false, fmt.Errorf("answer is not JSON: %w", err)
	}
	for _, e := range p.elems {
		switch c := v.(type) {
		case map[string]any:
			if e.index >= 0 {
				return 0, false, fmt.Errorf("json path %s: [%d] indexes an object", p.raw, e.index)
			}
			var ok bool
			if v, ok = c[e.name]; !ok {
				return 0, false, nil
			}
		case []any:
			if e.index < 0 {
				return 0, false, fmt.Errorf("json path %s: .%s names a member of an array", p.raw, e.name)
			}
			if e.index >= len(c) {
				return 0, false, nil
			}
			v = c[e.index]
		case nil:
			return 0, false, nil
		default:
			return 0, false, fmt.Errorf("json path %s: %s goes into a %s", p.raw, e, kind(v))
		}
	}
	var f float64
	switch c := v.(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		f, err = c.Float64()
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(c), 64)
		if err != nil {
			return 0, false, fmt.Errorf("json path %s: the string %q is not a number", p.raw, c)
		}
	default:
		return 0, false, fmt.Errorf("json path %s: the value is a %s, not a number", p.raw, kind(v))
	}
	if err != nil {
		return 0, false, fmt.Errorf("json path %s: %w", p.raw, err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("json path %s: the value is %g, not a number to compare", p.raw, f)
	}
	return f, true, nil
}

func (e elem) String() string {
	if e.index >= 0 {
		return fmt.Sprintf("[%d]", e.index)
	}
	return "." + e.name
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	}
	return "null"
}
