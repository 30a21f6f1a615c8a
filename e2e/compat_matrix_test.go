package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/kclients"
)

// driverMakers builds the drivers, registered by each driver's file with
// its place in the matrix (lower rows first).
var driverMakers []struct {
	row  int
	make func(t *testing.T) kclients.Driver
}

func registerDriver(row int, make func(t *testing.T) kclients.Driver) {
	driverMakers = append(driverMakers, struct {
		row  int
		make func(t *testing.T) kclients.Driver
	}{row, make})
}

// compatDrivers builds every registered driver, failing the test (with
// what to install) when one cannot be set up.
func compatDrivers(t *testing.T) []kclients.Driver {
	slices.SortStableFunc(driverMakers, func(a, b struct {
		row  int
		make func(t *testing.T) kclients.Driver
	}) int {
		return a.row - b.row
	})
	var ds []kclients.Driver
	for _, m := range driverMakers {
		ds = append(ds, m.make(t))
	}
	return ds
}

type cellState int

const (
	cellNotRun cellState = iota
	cellPass
	cellFail
	cellUnsupported
)

// matrix collects the result of each client × scenario × broker.
type matrix struct {
	mu        sync.Mutex
	drivers   []kclients.Driver
	scenarios []scenario
	cells     map[string]cellResult
}

type cellResult struct {
	state cellState
	why   string
}

func newMatrix(ds []kclients.Driver, ss []scenario) *matrix {
	return &matrix{drivers: ds, scenarios: ss, cells: map[string]cellResult{}}
}

func (m *matrix) set(version string, d kclients.Driver, s scenario, st cellState, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells[version+"\x00"+d.Name()+"\x00"+s.name] = cellResult{st, why}
}

// markdown renders one table per broker version, with footnotes for the
// reasons a client does not support a scenario and for failures.
func (m *matrix) markdown(versions []string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- written by e2e TestCompat on %s; do not edit -->\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("Each cell ran direct to the broker (the control) and through kproxy; it passes only if both passed and the client's traffic went through kproxy. ")
	b.WriteString("pass = passed; FAIL = failed; n/s = the client library does not support it (note); blank = not run for this broker.\n")
	var notes []string
	noteIndex := map[string]int{}
	for i, v := range versions {
		fmt.Fprintf(&b, "\n**Apache Kafka %s**", v)
		if i > 0 {
			b.WriteString(" (core scenarios)")
		}
		b.WriteString("\n\n| client |")
		for _, s := range m.scenarios {
			if i > 0 && !s.core {
				continue
			}
			fmt.Fprintf(&b, " %s |", s.name)
		}
		b.WriteString("\n|---|")
		for _, s := range m.scenarios {
			if i > 0 && !s.core {
				continue
			}
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, d := range m.drivers {
			fmt.Fprintf(&b, "| %s |", d.Name())
			for _, s := range m.scenarios {
				if i > 0 && !s.core {
					continue
				}
				c := m.cells[v+"\x00"+d.Name()+"\x00"+s.name]
				text := ""
				switch c.state {
				case cellPass:
					text = "pass"
				case cellFail:
					text = "**FAIL**"
				case cellUnsupported:
					text = "n/s"
				}
				if c.why != "" {
					why := strings.ReplaceAll(strings.SplitN(c.why, "\n", 2)[0], "|", "/")
					n, ok := noteIndex[why]
					if !ok {
						notes = append(notes, why)
						n = len(notes)
						noteIndex[why] = n
					}
					text += fmt.Sprintf(" [%d]", n)
				}
				fmt.Fprintf(&b, " %s |", text)
			}
			b.WriteString("\n")
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
	}
	return b.String()
}
