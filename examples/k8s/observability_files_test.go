package k8s_test

import (
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The dashboard and rules files, and what the tests read out of them.
const (
	dashboardFile = "grafana/kproxy-dashboard.json"
	rulesFile     = "prometheus-rules.yaml"
)

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule
// the file uses, our own struct rather than the prometheus-operator module
// (which would pull its whole client into this module). Decoded strictly,
// a misspelt or misplaced field fails as it would fail the Operator's CRD
// schema.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func loadRules(t *testing.T) prometheusRule {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r prometheusRule
	if err := yaml.UnmarshalStrict(raw, &r); err != nil {
		t.Fatalf("%s does not decode strictly: %v", rulesFile, err)
	}
	return r
}

// dashboard is the part of Grafana's dashboard JSON model the checks read;
// the rest is left to Grafana.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasourceRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int            `json:"id"`
		Type       string         `json:"type"`
		Title      string         `json:"title"`
		Datasource *datasourceRef `json:"datasource"`
		Targets    []struct {
			RefID        string         `json:"refId"`
			Expr         string         `json:"expr"`
			LegendFormat string         `json:"legendFormat"`
			Datasource   *datasourceRef `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaVars turns the dashboard's Grafana variables into PromQL that
// parses: range intervals become a duration, the others stay inside label
// matcher strings where they are plain text.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// labelValues matches a query variable's label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// promQL is one expression and where it comes from, for messages.
type promQL struct{ where, expr string }

// expressions lists every PromQL expression of both files: the rules'
// exprs, the panels' targets, and the selectors of the query variables.
func expressions(t *testing.T) []promQL {
	t.Helper()
	var out []promQL
	for _, g := range loadRules(t).Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, promQL{rulesFile + ": alert " + r.Alert, r.Expr})
		}
	}
	d := loadDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, promQL{dashboardFile + ": panel " + p.Title + " " + tg.RefID, grafanaVars.Replace(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("%s: variable %s: query: %v", dashboardFile, v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("%s: variable %s: %q is not label_values(SELECTOR, LABEL)", dashboardFile, v.Name, q.Query)
		}
		out = append(out, promQL{dashboardFile + ": variable " + v.Name, m[1]})
	}
	return out
}

// targetLabels are added by Prometheus when it scrapes a pod, not by
// kproxy; grouping by them is always possible.
var targetLabels = map[string]bool{"namespace": true, "pod": true}

// filter is a selector that matches on kproxy's labels, not only on its
// name ({result="error"}): some series of the metric must match all of
// matchers, or the selector picks nothing and an alert on it never fires.
type filter struct {
	where, name string
	matchers    []*labels.Matcher
}

// matches says whether a series with labels ls passes every matcher; a
// label the series lacks is the empty string, as in PromQL.
func (f filter) matches(ls map[string]string) bool {
	for _, m := range f.matchers {
		if !m.Matches(ls[m.Name]) {
			return false
		}
	}
	return true
}

// String is the selector as PromQL, kproxy's labels only.
func (f filter) String() string {
	ms := make([]string, len(f.matchers))
	for i, m := range f.matchers {
		ms[i] = m.String()
	}
	return f.name + "{" + strings.Join(ms, ", ") + "}"
}

// metricNames parses every expression with Prometheus' own parser and
// returns the metric names they select, each with the first place that
// uses it, the labels each metric is grouped by (sum by (api), ...),
// which kproxy must put on its series, and the selectors that filter on
// kproxy's labels, whose label values kproxy must use.
func metricNames(t *testing.T) (names map[string]string, groupedBy map[string]map[string]string, filters []filter) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	names, groupedBy = map[string]string{}, map[string]map[string]string{}
	for _, e := range expressions(t) {
		expr, err := p.ParseExpr(e.expr)
		if err != nil {
			t.Errorf("%s: PromQL does not parse: %v\n%s", e.where, err, e.expr)
			continue
		}
		found := 0
		parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			if vs.Name == "" {
				t.Errorf("%s: a selector without a metric name: %s", e.where, vs)
				return nil
			}
			found++
			if _, seen := names[vs.Name]; !seen {
				names[vs.Name] = e.where
			}
			var ms []*labels.Matcher
			for _, m := range vs.LabelMatchers {
				if m.Name != labels.MetricName && !targetLabels[m.Name] {
					ms = append(ms, m)
				}
			}
			if len(ms) > 0 {
				filters = append(filters, filter{e.where, vs.Name, ms})
			}
			for _, a := range path {
				agg, ok := a.(*parser.AggregateExpr)
				if !ok || agg.Without {
					continue
				}
				for _, l := range agg.Grouping {
					if targetLabels[l] {
						continue
					}
					if groupedBy[vs.Name] == nil {
						groupedBy[vs.Name] = map[string]string{}
					}
					if _, seen := groupedBy[vs.Name][l]; !seen {
						groupedBy[vs.Name][l] = e.where
					}
				}
			}
			return nil
		})
		if found == 0 {
			t.Errorf("%s: selects no metric: %s", e.where, e.expr)
		}
	}
	return names, groupedBy, filters
}

// family maps a histogram's or summary's series name to its family.
func family(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok {
			return base
		}
	}
	return name
}

// The rules file decodes strictly, and each alert has what an operator's
// routing and on-call need: a for:, a severity and both annotations. The
// alerts the issue asks for are there.
func TestPrometheusRulesDecodeStrictly(t *testing.T) {
	r := loadRules(t)
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Kind != "PrometheusRule" || r.Metadata.Name == "" {
		t.Fatalf("%s: %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", rulesFile, r.APIVersion, r.Kind, r.Metadata.Name)
	}
	var alerts []string
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			alerts = append(alerts, rule.Alert)
			switch {
			case rule.Alert == "" || rule.Record != "":
				t.Errorf("group %s: a rule that is not an alert: %+v", g.Name, rule)
			case rule.Expr == "" || rule.For == "":
				t.Errorf("alert %s: needs expr and for:", rule.Alert)
			case !slices.Contains([]string{"critical", "warning", "info"}, rule.Labels["severity"]):
				t.Errorf("alert %s: severity %q, want critical, warning or info", rule.Alert, rule.Labels["severity"])
			case rule.Annotations["summary"] == "" || rule.Annotations["description"] == "":
				t.Errorf("alert %s: needs summary and description annotations", rule.Alert)
			}
		}
	}
	checkRulefmt(t)
	for _, want := range []string{"KproxyNotReady", "KproxyUpstreamDialFailures", "KproxyOverflowCloses",
		"KproxySpansDropped", "KproxyPolicyRejectionsSpiking", "KproxyCertificateExpiringSoon",
		"KproxySASLAuthenticationFailing"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s: no alert %s (have %v)", rulesFile, want, alerts)
		}
	}
}

// checkRulefmt hands the rule groups to Prometheus' own rule-file loader,
// which the Operator's generated rule files go through: it checks what the
// struct above cannot, that each for: is a duration and each annotation
// and label template parses.
func checkRulefmt(t *testing.T) {
	t.Helper()
	_, errs := rulefmt.Parse(ruleGroupsYAML(t), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: Prometheus refuses the rules: %v", rulesFile, err)
	}
}

// ruleGroupsYAML is the PrometheusRule's spec, its groups: the rule file
// the Operator hands Prometheus.
func ruleGroupsYAML(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	groups, err := yaml.JSONToYAML(doc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// The dashboard is one Grafana can import and that follows the chosen
// data source and pods: a datasource variable, namespace and pod variables
// from label_values, every panel and target on ${datasource}, every target
// with an expression, and the rows.
func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 39 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both and the schema of Grafana 11 or later (39+)", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
		}
	}
	if want := map[string]string{"datasource": "datasource", "namespace": "query", "pod": "query"}; !maps.Equal(vars, want) {
		t.Errorf("variables %v, want %v", vars, want)
	}
	var rows []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
			if !strings.Contains(tg.Expr, `namespace=~"$namespace"`) || !strings.Contains(tg.Expr, `pod=~"$pod"`) {
				t.Errorf("panel %q %s: does not follow the namespace and pod variables: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	if want := []string{"Traffic", "Latency", "Errors", "Policies", "Connections", "Tracing", "TLS", "SASL", "Consumers", "Client metrics"}; !slices.Equal(rows, want) {
		t.Errorf("rows %v, want %v", rows, want)
	}
}

// legendLabel is a label a legend template prints: {{api}}.
var legendLabel = regexp.MustCompile(`{{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*}}`)

// TestDashboardLegendsUseGroupedLabels checks each legend prints only labels
// its query's outer aggregation keeps: a legend naming a label the sum
// drops shows the bare template text on every line of the panel.
func TestDashboardLegendsUseGroupedLabels(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, panel := range loadDashboard(t).Panels {
		for _, tg := range panel.Targets {
			expr, err := p.ParseExpr(grafanaVars.Replace(tg.Expr))
			if err != nil {
				continue // TestObservabilityMetricsExist reports it
			}
			var outer *parser.AggregateExpr
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if a, ok := n.(*parser.AggregateExpr); ok && outer == nil {
					outer = a
				}
				return nil
			})
			if outer == nil || outer.Without {
				continue // every label of the series survives
			}
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if !slices.Contains(outer.Grouping, m[1]) {
					t.Errorf("panel %q %s: legend %q prints %s, which %s drops (it keeps %v)",
						panel.Title, tg.RefID, tg.LegendFormat, m[1], outer.Op, outer.Grouping)
				}
			}
		}
	}
}
