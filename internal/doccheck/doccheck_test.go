package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"
)

// root is the repository's root, from this package's directory.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("repository root %s: no go.mod: %v", r, err)
	}
	return r
}

// markdownFiles lists the files whose links are checked, relative to the
// root: README.md, BENCHMARKS.md, every .md under docs/, and the
// Kubernetes example's guide, which links into docs/.
func markdownFiles(t *testing.T, r string) []string {
	t.Helper()
	files := []string{"README.md", "BENCHMARKS.md", filepath.Join("examples", "k8s", "README.md")}
	err := filepath.WalkDir(filepath.Join(r, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(r, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking docs/: %v", err)
	}
	return files
}

// doc is a markdown file with its fenced code blocks and inline code
// blanked out, so that neither their links nor their '#' lines count.
type doc struct {
	lines []string // prose only: code replaced by spaces
	raw   []string
}

var fence = regexp.MustCompile("^ {0,3}(```|~~~)")

func readDoc(t *testing.T, path string) doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	in := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		d.raw = append(d.raw, line)
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case in == "":
				in = m[1]
			case in == m[1]:
				in = ""
			}
			d.lines = append(d.lines, "")
			continue
		}
		if in != "" {
			d.lines = append(d.lines, "")
			continue
		}
		d.lines = append(d.lines, blankCode(line))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// blankCode replaces inline code spans (`...`) with spaces.
func blankCode(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); i++ {
		if b[i] != '`' {
			continue
		}
		n := 1
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closing := strings.Index(string(b[i+n:]), strings.Repeat("`", n))
		if closing < 0 {
			i += n - 1
			continue
		}
		end := i + n + closing + n
		for j := i; j < end; j++ {
			b[j] = ' '
		}
		i = end - 1
	}
	return string(b)
}

var heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)

// anchors returns the GitHub anchors of a document's headings: the text
// lowercased, spaces to '-', punctuation other than '-' and '_' dropped,
// and "-1", "-2" ... after a repeat.
func (d doc) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for i, line := range d.lines {
		if line == "" {
			continue
		}
		m := heading.FindStringSubmatch(d.raw[i])
		if m == nil || heading.FindStringSubmatch(line) == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var mdLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)

func anchor(text string) string {
	// Links in a heading count by their text only.
	text = mdLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

type link struct {
	line   int
	target string
}

func (d doc) links() []link {
	var out []link
	for i, line := range d.lines {
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	docs := map[string]doc{} // by path from the root, read once
	get := func(rel string) doc {
		if d, ok := docs[rel]; ok {
			return d
		}
		d := readDoc(t, filepath.Join(r, rel))
		docs[rel] = d
		return d
	}
	var broken []string
	checked := 0
	for _, file := range markdownFiles(t, r) {
		for _, l := range get(file).links() {
			if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue // absolute URL, mailto: ...
			}
			checked++
			path, frag, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(path)))
				if strings.HasPrefix(target, "..") {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: leaves the repository", file, l.line, l.target))
					continue
				}
				if _, err := os.Stat(filepath.Join(r, target)); err != nil {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no file %s", file, l.line, l.target, filepath.ToSlash(target)))
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !get(target).anchors()[strings.ToLower(frag)] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading with anchor #%s in %s", file, l.line, l.target, frag, filepath.ToSlash(target)))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: is the link pattern wrong?")
	}
	if len(broken) > 0 {
		t.Errorf("%d broken relative links (anchors follow GitHub's rules: lowercase, spaces to '-', punctuation but '-' and '_' dropped):\n  %s",
			len(broken), strings.Join(broken, "\n  "))
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Credentials at the sidecar (SASL origination)":                               "credentials-at-the-sidecar-sasl-origination",
		"Soak: 30 minutes at a steady mixed load (`bash bench/soak.sh`)":              "soak-30-minutes-at-a-steady-mixed-load-bash-benchsoaksh",
		"What limits 1 × 64 now":                                                      "what-limits-1--64-now",
		"Cluster mode within 5% of single-broker: measured two ways":                  "cluster-mode-within-5-of-single-broker-measured-two-ways",
		"tls_and [links](x.md)":                                                       "tls_and-links",
		"Round 2 (issue 18, 2026-12-01): where each target stands":                    "round-2-issue-18-2026-12-01-where-each-target-stands",
		"Read buffers that doubled on busy connections relayed on the poller (fixed)": "read-buffers-that-doubled-on-busy-connections-relayed-on-the-poller-fixed",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}

// exampleYAML returns examples/kproxy.yaml with its commented-out
// sections (tls:, cluster:, sasl:, whose files must exist for kproxy to
// start) uncommented, so that their fields are checked too. A section is
// a line "# name:" at the start of a line and the comment lines indented
// under it; inside one, a commented-out field ("#   # token_file: x") is
// uncommented as well.
func exampleYAML(t *testing.T, r string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r, "examples", "kproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start := regexp.MustCompile(`^# [a-z_]+:\s*(#.*)?$`)
	field := regexp.MustCompile(`^(\s+)# ([a-z_]+:(\s.*)?)$`)
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case start.MatchString(line):
			in = true
			line = strings.TrimPrefix(line, "# ")
		case in && strings.HasPrefix(line, "#  "):
			line = strings.TrimPrefix(line, "# ")
			if m := field.FindStringSubmatch(line); m != nil {
				line = m[1] + m[2]
			}
		default:
			in = false
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// flatten lists the field paths of a YAML node: "proxy.listen",
// "tls.listener.cert_file", "policies.rules[].match.apis". A mapping's
// fields are walked, a list's elements are walked as "name[]", and
// anything else (a scalar, an empty mapping, a list of scalars) is a
// field.
func flatten(prefix string, n *yaml.Node, out map[string]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			flatten(prefix, c, out)
		}
	case yaml.MappingNode:
		if len(n.Content) == 0 && prefix != "" {
			out[prefix] = true
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if prefix != "" {
				p = prefix + "." + p
			}
			flatten(p, n.Content[i+1], out)
		}
	case yaml.SequenceNode:
		walked := false
		for _, c := range n.Content {
			if c.Kind == yaml.MappingNode {
				flatten(prefix+"[]", c, out)
				walked = true
			}
		}
		if !walked {
			out[prefix] = true
		}
	default:
		out[prefix] = true
	}
}

// sectionTables returns, for each "## name" section of configuration.md,
// the field paths named in backticks in the first column of its tables.
func sectionTables(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	d := readDoc(t, path)
	code := regexp.MustCompile("`([^`]+)`")
	out := map[string]map[string]bool{}
	section := ""
	for i, line := range d.lines {
		if line == "" {
			continue
		}
		if m := heading.FindStringSubmatch(d.raw[i]); m != nil && len(m[1]) == 2 {
			section = strings.Trim(strings.Fields(m[2] + " x")[0], "`:")
			out[section] = map[string]bool{}
			continue
		}
		raw := d.raw[i]
		if section == "" || !strings.HasPrefix(raw, "|") {
			continue
		}
		cells := strings.Split(raw, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			out[section][m[1]] = true
		}
	}
	return out
}

func TestExampleFieldsAreDocumented(t *testing.T) {
	r := root(t)
	var n yaml.Node
	if err := yaml.Unmarshal(exampleYAML(t, r), &n); err != nil {
		t.Fatalf("examples/kproxy.yaml (with its commented-out sections uncommented): %v", err)
	}
	fields := map[string]bool{}
	flatten("", &n, fields)
	for _, must := range []string{"proxy.upstream", "policies.rules[].match.apis", "tls.listener.cert_file", "cluster.node_ids.min", "sasl.upstream.token_file"} {
		if !fields[must] {
			t.Errorf("examples/kproxy.yaml: field %s not found: the flattening or the uncommenting is wrong (found %d fields)", must, len(fields))
		}
	}
	tables := sectionTables(t, filepath.Join(r, "docs", "configuration.md"))
	var missing []string
	for f := range fields {
		section, _, _ := strings.Cut(f, ".")
		section = strings.TrimSuffix(section, "[]")
		switch {
		case tables[section] == nil:
			missing = append(missing, fmt.Sprintf("%s: no section \"## %s\"", f, section))
		case !tables[section][f] && !placeholderMatch(tables[section], f):
			missing = append(missing, fmt.Sprintf("%s: not in the table of \"## %s\"", f, section))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d fields of examples/kproxy.yaml are not documented in docs/configuration.md (each needs a row whose first column names it in backticks, in its section's table):\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// placeholderMatch reports whether a documented path with a <name>
// placeholder (a map keyed by the user, such as
// policies.rules[].require.configs.<name>.min) covers field: <name>
// stands for one or more dotted segments (config names have dots).
func placeholderMatch(documented map[string]bool, field string) bool {
	for d := range documented {
		if !strings.Contains(d, "<name>") {
			continue
		}
		parts := strings.Split(d, "<name>")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		if regexp.MustCompile("^" + strings.Join(parts, "[^ ]+") + "$").MatchString(field) {
			return true
		}
	}
	return false
}
