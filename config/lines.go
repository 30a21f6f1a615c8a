package config

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// at builds an Error for a dotted field path, with the line of the deepest
// part of the path that the file contains.
func at(file string, root *yaml.Node, path, msg string) *Error {
	return &Error{File: file, Field: path, Msg: msg, Line: lineOf(root, path)}
}

func lineOf(root *yaml.Node, path string) int {
	if root == nil || len(root.Content) == 0 {
		return 0
	}
	n, line := root.Content[0], 0
	for _, key := range strings.Split(path, ".") {
		if n.Kind == yaml.SequenceNode {
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(n.Content) {
				break
			}
			n = n.Content[i]
			line = n.Line
			continue
		}
		if n.Kind != yaml.MappingNode {
			break
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			break
		}
	}
	return line
}

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns yaml.v3's messages ("yaml: unmarshal errors:\n  line 3:
// field foo not found in type proxy.Config") into an Error with a line.
func yamlError(err error) *Error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	return &Error{Line: line, Msg: sectionNames.Replace(m[2])}
}

// sectionNames rewrites the Go type names in yaml.v3's messages ("not found
// in type proxy.Config") as the sections a user writes ("in section proxy").
var sectionNames = func() *strings.Replacer {
	t := reflect.TypeOf(File{})
	pairs := []string{"in type " + t.String(), "at the top level"}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		pairs = append(pairs, "in type "+f.Type.String(), "in section "+strings.Split(f.Tag.Get("yaml"), ",")[0])
	}
	return strings.NewReplacer(pairs...)
}()
