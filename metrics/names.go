package metrics

import (
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// descRE reads a metric's name and variable labels from its description:
// prometheus.Desc exports neither, but prints both.
var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

// Names are the metrics m registers, by name, each with its labels
// sorted (plan, the constant label, included): every one, whether it has
// a series yet or not (a vector without children is absent from a
// scrape). Dashboards and alerts are checked against it.
func (m *Metrics) Names() map[string][]string {
	ch := make(chan *prometheus.Desc)
	go func() {
		m.reg.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		sub := descRE.FindStringSubmatch(d.String())
		if sub == nil {
			continue
		}
		labels := []string{"plan"}
		for l := range strings.SplitSeq(sub[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out[sub[1]] = labels
	}
	return out
}
