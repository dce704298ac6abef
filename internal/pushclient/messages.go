package pushclient

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Message is the console text of an outcome: what happened, what to do, and
// (savedAt, a sentence such as "Scan results saved in output/: a.csv") where
// the results are, which every outcome states.
func (r Result) Message(savedAt string) string {
	var lines []string
	switch r.Outcome {
	case Pushed:
		status := r.JobStatus
		if status == "" {
			status = "pending"
		}
		lines = append(lines,
			fmt.Sprintf("Findings pushed: ingestion job %s (%s, %d records).", r.JobID, status, r.Total),
			fmt.Sprintf("Follow the import at %s/scans, or run: postctl ingestions wait %s", r.AppURL, r.JobID))
	case Skipped:
		lines = append(lines, fmt.Sprintf("Push skipped: no API key configured. Set %s to an API key with the Manage Ingestions permission to push findings.", EnvAPIKey))
	case Unreachable:
		lines = append(lines, fmt.Sprintf("Push failed: the API at %s is unreachable: %s. Check the URL (%s) and your network connection.", r.Endpoint, r.Detail, EnvBaseURL))
	case SubscriptionRequired:
		lines = append(lines, fmt.Sprintf("Push failed: importing findings needs a subscription, and this tenant has none (HTTP 402: %s).", r.Detail))
	case Unauthorized:
		lines = append(lines, fmt.Sprintf("Push failed: HTTP 401 Unauthorized: %s. Verify %s (it may be wrong, revoked or expired) and that its user has the Manage Ingestions permission.", r.Detail, EnvAPIKey))
	case HTTPError:
		lines = append(lines, fmt.Sprintf("Push failed: HTTP %d %s: %s", r.HTTPStatus, http.StatusText(r.HTTPStatus), r.Detail))
	case Redirected:
		lines = append(lines, fmt.Sprintf("Push failed: %s answered HTTP %d with a redirect to %s; redirects are not followed. Set %s to the API's own address.", r.Endpoint, r.HTTPStatus, orUnknown(r.Location), EnvBaseURL))
	case Untrusted:
		lines = append(lines, fmt.Sprintf("Push failed: the TLS certificate of %s is not trusted: %s. If the API sits behind a private or proxy CA, install that CA in the operating system's (or container's) trust store, or set %s to a bundle holding the public roots and that CA.", r.Endpoint, r.Detail, EnvRequestsCABundle))
	case Interrupted:
		lines = append(lines, fmt.Sprintf("Push interrupted before %s answered; the ingestion job may or may not have been created (postctl ingestions list shows it).", r.Endpoint))
	case Invalid:
		lines = append(lines, fmt.Sprintf("Push failed: %s. Nothing was sent.", strings.TrimSuffix(r.Detail, ".")))
	default:
		lines = append(lines, fmt.Sprintf("Push failed: %s", r.Detail))
	}
	if savedAt != "" {
		lines = append(lines, savedAt)
	}
	return strings.Join(lines, "\n") + "\n"
}

func orUnknown(s string) string {
	if s == "" {
		return "(no Location header)"
	}
	return s
}

// Print writes the outcome: success to stdout, the rest to stderr as the
// warnings they are.
func (r Result) Print(stdout, stderr io.Writer, savedAt string) {
	w := stderr
	if r.OK() {
		w = stdout
	}
	_, _ = io.WriteString(w, r.Message(savedAt))
}
