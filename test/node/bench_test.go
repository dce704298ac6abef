package node

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/localcluster"
	"github.com/posture-dev/posture/internal/reportgen"
)

// The install and ingestion figures of docs/performance.md, on the real
// node (make bench-node):
//
//	go test ./test/node -run '^$' -bench . -benchtime 1x
//
// Each benchmark repeats its measurement -node-runs times and reports the
// median (and the extremes), so the machine's swings show.
var benchRuns = flag.Int("node-runs", 5, "repetitions of each node benchmark; the median is reported")

// medians runs f n times and returns the median, minimum and maximum.
func medians(f func() float64) (med, lo, hi float64) {
	var xs []float64
	for range *benchRuns {
		xs = append(xs, f())
	}
	slices.Sort(xs)
	return xs[len(xs)/2], xs[0], xs[len(xs)-1]
}

func report(b *testing.B, name, unit string, med, lo, hi float64) {
	b.ReportMetric(med, unit)
	b.Logf("%s: median %.2f %s (min %.2f, max %.2f, %d runs)", name, med, unit, lo, hi, *benchRuns)
}

// BenchmarkHelmInstall times helm install with the chart's defaults (after
// helm uninstall of the release there) until every manager pod is Ready,
// and on until the aggregated API is Available.
func BenchmarkHelmInstall(b *testing.B) {
	needCluster(b)
	for b.Loop() {
		var available []float64
		med, lo, hi := medians(func() float64 {
			ctx := ctxFor(b, 5*time.Minute)
			if _, err := cluster.Helm(ctx, "uninstall", release, "-n", systemNS, "--wait", "--ignore-not-found"); err != nil {
				b.Fatal(err)
			}
			installed.Lock()
			installed.done = false
			installed.Unlock()
			p := localcluster.Posture{Chart: chart(), StoreSecret: true}
			t0 := time.Now()
			if _, err := cluster.Helm(ctx, p.HelmArgs()...); err != nil {
				b.Fatal(err)
			}
			if err := cluster.WaitRollout(ctx, systemNS, release, 3*time.Minute); err != nil {
				b.Fatal(err)
			}
			ready := time.Since(t0).Seconds()
			if err := cluster.WaitAPIServiceAvailable(ctx, "v1alpha1.data.posture.dev", 2*time.Minute); err != nil {
				b.Fatal(err)
			}
			available = append(available, time.Since(t0).Seconds())
			return ready
		})
		report(b, "helm install until every pod is Ready", "s/install", med, lo, hi)
		slices.Sort(available)
		report(b, "helm install until the aggregated API is Available", "s/available", available[len(available)/2], available[0], available[len(available)-1])
	}
	install(b) // the demo tenants' API, for the benchmarks after this one
}

// ingest uploads path through the REST API and returns the seconds from
// the upload's start to the ingestion's completion (through a worker Job's
// pod) and the peak RSS of the worker process seen meanwhile.
func ingest(b *testing.B, api apiClient, path string, records int) (seconds float64, workerKiB int) {
	t0 := time.Now()
	stop := make(chan struct{})
	peak := make(chan int, 1)
	go func() { peak <- samplePeakRSS(stop, "worker") }()
	id := api.upload(b, path)
	ing := api.wait(b, id, 10*time.Minute)
	seconds = time.Since(t0).Seconds()
	close(stop)
	workerKiB = <-peak
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Processed != records {
		b.Fatalf("ingestion %s: %s %+v, want %d processed", id, ing.Data.Attributes.Status, s, records)
	}
	return seconds, workerKiB
}

// samplePeakRSS samples the node's /manager processes whose first argument
// is arg ("worker": Job pods) until stop, and returns the highest RSS seen.
func samplePeakRSS(stop <-chan struct{}, arg string) int {
	peak := 0
	for {
		for _, p := range nodeProcesses(arg) {
			peak = max(peak, p.rssKiB)
		}
		select {
		case <-stop:
			return peak
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func BenchmarkIngest1500ThroughJob(b *testing.B) {
	api := install(b)
	for b.Loop() {
		var worker int
		med, lo, hi := medians(func() float64 {
			s, w := ingest(b, api, fixture("aws_1500_records.ocsf.json"), 1500)
			worker = max(worker, w)
			return s
		})
		report(b, "1,500 records, upload to completed", "s/ingestion", med, lo, hi)
		b.ReportMetric(float64(worker)/1024, "worker-peak-MiB")
	}
}

func BenchmarkIngest100kThroughJob(b *testing.B) {
	api := install(b)
	path := bigReport(b)
	for b.Loop() {
		var worker int
		med, lo, hi := medians(func() float64 {
			s, w := ingest(b, api, path, 100_000)
			worker = max(worker, w)
			return s
		})
		report(b, "100,000 records, upload to completed", "s/ingestion", med, lo, hi)
		b.ReportMetric(100_000/med, "records/s")
		b.ReportMetric(float64(worker)/1024, "worker-peak-MiB")
		var rss []string
		for _, p := range nodeProcesses("") {
			rss = append(rss, fmt.Sprintf("%.0f MiB", float64(p.rssKiB)/1024))
			b.ReportMetric(float64(p.rssKiB)/1024, "manager-RSS-MiB")
		}
		b.Logf("manager pods' RSS after the runs: %s", strings.Join(rss, ", "))
	}
}

// BenchmarkIngest4ParallelThroughJobs uploads four 25,000-record reports one
// after the other and times them until all four completed; each runs in its
// own Job pod, at the same time as the others.
func BenchmarkIngest4ParallelThroughJobs(b *testing.B) {
	api := install(b)
	g, err := reportgen.New()
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	for i := range 4 {
		p := filepath.Join(workDir, "quarter-"+strconv.Itoa(i)+".ocsf.json")
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.WriteRange(f, i*25_000, 25_000); err != nil {
			b.Fatal(err)
		}
		f.Close()
		paths = append(paths, p)
	}
	for b.Loop() {
		med, lo, hi := medians(func() float64 {
			t0 := time.Now()
			var ids []string
			for _, p := range paths {
				ids = append(ids, api.upload(b, p))
			}
			for len(ids) > 0 {
				ing := api.get(b, ids[0])
				if !ing.ended() {
					time.Sleep(250 * time.Millisecond)
					continue
				}
				if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Processed != 25_000 {
					b.Fatalf("ingestion %s: %s %+v", ids[0], ing.Data.Attributes.Status, s)
				}
				ids = ids[1:]
			}
			return time.Since(t0).Seconds()
		})
		report(b, "4 × 25,000 records in parallel, first upload to last completed", "s/batch", med, lo, hi)
		b.ReportMetric(100_000/med, "records/s")
	}
}

// BenchmarkImageSizes reports the size of each image archive make images
// writes (compressed layers, as a registry stores them).
func BenchmarkImageSizes(b *testing.B) {
	needCluster(b)
	archives, _ := filepath.Glob(filepath.Join(workDir, "images", "*.tar"))
	for b.Loop() {
		for _, a := range archives {
			fi, err := os.Stat(a)
			if err != nil {
				b.Fatal(err)
			}
			name := strings.TrimSuffix(filepath.Base(a), ".tar")
			b.ReportMetric(float64(fi.Size())/(1<<20), name+"-MiB")
		}
	}
}
