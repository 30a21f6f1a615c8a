package inject

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"
)

// Manifest injects the sidecar into every Deployment and StatefulSet of a
// multi-document YAML manifest that asks for it, decoding them strictly,
// and leaves every other document as it was.
func Manifest(in []byte, o Options) ([]byte, error) {
	docs := bytes.Split(in, []byte("\n---"))
	var out bytes.Buffer
	for i, doc := range docs {
		if i > 0 {
			out.WriteString("\n---")
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			out.Write(doc)
			continue
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		ops, err := Patch(raw, o, true)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(ops) == 0 {
			out.Write(doc)
			continue
		}
		p, err := json.Marshal(ops)
		if err != nil {
			return nil, err
		}
		patch, err := jsonpatchapply.DecodePatch(p)
		if err != nil {
			return nil, err
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		y, err := yaml.JSONToYAML(patched)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("\n")
		}
		out.Write(bytes.TrimRight(y, "\n"))
		if i == len(docs)-1 {
			out.WriteString("\n")
		}
	}
	return out.Bytes(), nil
}

// stripComments drops comment lines, to tell an empty document from one
// with content.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
