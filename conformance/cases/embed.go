// Package cases holds the conformance suite's cases as data: YAML files in
// the proto3-JSON form of interlingua.conformance.v1.Case, embedded in the
// binary. common/ holds the cases every frontend × backend pair runs;
// <protocol>/ holds cases that exercise one frontend protocol's own
// features (they run for that frontend against every backend, and in
// server mode for that protocol).
package cases

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

//go:embed */*.yaml
var files embed.FS

// Common is the folder of the cases every pair runs.
const Common = "common"

// Case is a loaded case and the folder it came from.
type Case struct {
	*cv1.Case
	// Folder is "common" or the frontend protocol the case is for.
	Folder string
	// File is the case's path in the embedded tree.
	File string
}

// MaxCaseBytes bounds one case file.
const MaxCaseBytes = 1 << 20

var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Load parses every embedded case.
func Load() ([]*Case, error) { return LoadFS(files) }

// LoadFS parses every <folder>/*.yaml of fsys, sorted by folder and name;
// unknown fields, duplicate names and names that do not match their file
// are refused, naming the file.
func LoadFS(fsys fs.FS) ([]*Case, error) {
	paths, err := fs.Glob(fsys, "*/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Case
	seen := map[string]string{}
	for _, p := range paths {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		c, err := Parse(p, data)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[c.GetName()]; dup {
			return nil, fmt.Errorf("%s: case name %q is also used by %s", p, c.GetName(), prev)
		}
		seen[c.GetName()] = p
		out = append(out, &Case{Case: c, Folder: path.Dir(p), File: p})
	}
	return out, nil
}

// Parse parses one case file (YAML in the proto3-JSON form of Case).
func Parse(file string, data []byte) (*cv1.Case, error) {
	if len(data) > MaxCaseBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, MaxCaseBytes)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// Sorted keys: protojson names the first bad field it meets, so the
	// same file gives the same error; invalid UTF-8 becomes U+FFFD, as
	// encoding/json had it, and protojson judges the rest.
	js, err := json.Marshal(jsonable(doc), json.Deterministic(true), json.AllowInvalidUTF8(true))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	c := &cv1.Case{}
	if err := protojson.Unmarshal(js, c); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	want := strings.TrimSuffix(path.Base(file), ".yaml")
	switch {
	case c.GetName() == "":
		c.Name = want
	case c.GetName() != want:
		return nil, fmt.Errorf("%s: name %q does not match the file name", file, c.GetName())
	}
	if !namePattern.MatchString(c.GetName()) {
		return nil, fmt.Errorf("%s: name %q is not lower-case words joined by dashes", file, c.GetName())
	}
	return c, nil
}

// jsonable turns YAML's map[any]any (not produced by yaml.v3 for string
// keys, but possible for others) into JSON-encodable maps.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}
