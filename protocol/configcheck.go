package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// CheckNode walks a config document (or an adapter's options block)
// against the type it decodes into and reports, each with its line, what yaml.v3's own errors word in
// Go's terms or let pass: an unknown key (with the closest known one), a
// duration written as a bare number (yaml.v3 would take 30 as 30 ns), a
// value of the wrong kind ("want a whole number", never "into int64").
// Blocks a config holds as yaml.Node (a backend's options) belong to their
// adapter and are not walked here: DecodeOptions walks them against the
// adapter's own type. Lines are the file's: yaml.v3 keeps them on each
// node of a block.
func CheckNode(n *yaml.Node, t reflect.Type, path string) []error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	switch {
	case t == reflect.TypeOf(yaml.Node{}):
		return nil
	case t.Kind() == reflect.Pointer:
		return CheckNode(n, t.Elem(), path)
	case t.Kind() == reflect.Struct:
		return checkStruct(n, t, path)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return []error{configErr(n, path, "want a mapping of names to values")}
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, CheckNode(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value))...)
		}
		return errs
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return []error{configErr(n, path, "want a list")}
		}
		var errs []error
		for i, item := range n.Content {
			errs = append(errs, CheckNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	}
	return checkScalar(n, t, path)
}

func checkStruct(n *yaml.Node, t reflect.Type, path string) []error {
	if n.Kind != yaml.MappingNode {
		return []error{configErr(n, path, "want a mapping of keys to values")}
	}
	fields := map[string]reflect.Type{}
	addFields(fields, t)
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", k.Value)
			if near := closestKey(k.Value, fields); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			errs = append(errs, configErr(k, path, msg))
			continue
		}
		errs = append(errs, CheckNode(v, ft, joinPath(path, k.Value))...)
	}
	return errs
}

// addFields adds t's keys and their types to fields, those of a struct
// tagged ",inline" as its own.
func addFields(fields map[string]reflect.Type, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct:
			addFields(fields, f.Type)
		case name != "" && name != "-":
			fields[name] = f.Type
		}
	}
}

func checkScalar(n *yaml.Node, t reflect.Type, path string) []error {
	if n.Kind != yaml.ScalarNode {
		return []error{configErr(n, path, "want a single value")}
	}
	switch {
	case t == durationType:
		if n.Tag == "!!int" || n.Tag == "!!float" {
			return []error{configErr(n, path, fmt.Sprintf("%s has no unit: write %ss (or ms, m, h)", n.Value, n.Value))}
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return []error{configErr(n, path, fmt.Sprintf("want a duration such as 30s or 1m30s, got %q", n.Value))}
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if n.Tag != "!!int" {
			return []error{configErr(n, path, fmt.Sprintf("want a whole number, got %q", n.Value))}
		}
	case t.Kind() == reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return []error{configErr(n, path, fmt.Sprintf("want a number, got %q", n.Value))}
		}
	case t.Kind() == reflect.Bool:
		if n.Tag != "!!bool" {
			return []error{configErr(n, path, fmt.Sprintf("want true or false, got %q", n.Value))}
		}
	}
	return nil
}

// durationType is time.Duration's: a duration option is written 30s.
var durationType = reflect.TypeOf(time.Duration(0))

func configErr(n *yaml.Node, path, msg string) error {
	if path != "" {
		msg = path + ": " + msg
	}
	if n.Line == 0 { // a node built in code, not read from a file
		return errors.New(msg)
	}
	return fmt.Errorf("line %d: %s", n.Line, msg)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// closestKey is the known key nearest to k by edit distance, if near
// enough to be a slip (a third of its length, at least 2).
func closestKey(k string, known map[string]reflect.Type) string {
	best, bestD := "", max(2, len(k)/3)+1
	for name := range known {
		if d := editDistance(k, name); d < bestD || d == bestD && name < best {
			best, bestD = name, d
		}
	}
	if bestD > max(2, len(k)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
