package main

import (
	"fmt"
	"time"
)

// report prints the run's figures and the checks' outcome.
func (w *world) report(load, drain time.Duration, sum checked, kills int) {
	out := w.cfg.Out
	fmt.Fprintf(out, "\n## Soak: %s of mixed load, seed %d\n\n", load.Round(time.Second), w.cfg.Seed)
	total, _ := w.rec.counts()
	fmt.Fprintf(out, "Throughput: %d calls in %s, %.1f calls/s; %d records accepted in %d uploads, %.0f valid records stored a second; %d findings stored at the end. Drain and checks: %s.\n\n",
		total, load.Round(time.Second), float64(total)/load.Seconds(), sum.records, sum.accepted,
		float64(sum.validRecords)/load.Seconds(), sum.stored, drain.Round(time.Second))
	fmt.Fprintf(out, "### Operations (latency of answered calls)\n\n")
	w.rec.writeOps(out, load)
	fmt.Fprintf(out, "\n### Answers other than 2xx, by status and code\n\n")
	w.rec.writeCodes(out)
	fmt.Fprintf(out, "\n### Kills, and the aggregated API's availability\n\n")
	ks := w.killsSoFar()
	if len(ks) == 0 {
		fmt.Fprintln(out, "none")
	}
	for _, k := range ks {
		fmt.Fprintf(out, "- kill -9 at %s: serving again after %s, aggregated API available through kube-apiserver after %s\n",
			k.at.Round(time.Second), k.serving.Round(10*time.Millisecond), k.available.Round(10*time.Millisecond))
	}
	for _, s := range w.outages.list() {
		if s.kubeOnly {
			fmt.Fprintf(out, "- kube-apiserver read the aggregated API unavailable from %s to %s (%s)\n",
				s.from.Sub(w.start).Round(time.Second), s.to.Sub(w.start).Round(time.Second), s.why)
		}
	}
	fmt.Fprintf(out, "\n### Manager RSS over time\n\n")
	w.writeRSS(out, load)
	fmt.Fprintf(out, "\n### Checks\n\n%s.\n", sum)
	fmt.Fprintf(out, "Records: %d in accepted uploads, %d of them refused by the worker (each with its error row), %d distinct valid records expected once each in the store.\n",
		sum.records, sum.invalid, sum.validRecords)
	fmt.Fprintf(out, "Isolation: %d ingestion ids seen in the tenants' reads, each the reader's own.\n", sum.seenIngestions)
	if probs := w.probs.list(); len(probs) > 0 {
		fmt.Fprintf(out, "\nFAILED checks:\n")
		for _, p := range probs {
			fmt.Fprintf(out, "- %s\n", p)
		}
	} else {
		fmt.Fprintf(out, "\nEvery check passed: every accepted record is stored exactly once, every refused record and upload has its reason, no tenant saw another's data, and neither the manager nor the MCP server logged an error.\n")
	}
}
