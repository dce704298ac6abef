package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/posture-dev/posture/internal/pushclient"
)

func (a *app) pushCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "push FILE.ocsf.json",
		Short: "Upload an OCSF report of any scanner to the ingestion API",
		Long: `Uploads one OCSF Detection Finding report (a JSON array, file name ending in .ocsf.json)
to POST /api/v1/ingestions, exactly as scan --push-to-cloud does: ` + pushclient.EnvAPIKey + `,
` + pushclient.EnvBaseURL + `, one TLS context (system + bundled roots + ` + pushclient.EnvRequestsCABundle + ` or
` + pushclient.EnvCurlCABundle + `), one POST, no retry, redirects refused. Exit code 0 when the report
was accepted, 1 otherwise (there is no scan whose exit code to preserve).`,
		Example: `  SERVICE_CLOUD_API_KEY=pk_... postctl push prowler-output-123456789012-20260101.ocsf.json`,
		Args:    args(1, "the report file to upload"),
		RunE: func(cmd *cobra.Command, files []string) error {
			res := pushclient.Push(cmd.Context(), pushclient.Request{File: files[0], Getenv: a.getenv, UserAgent: userAgent()})
			res.Print(a.stdout, a.stderr, fmt.Sprintf("Scan results saved in %s (unchanged).", files[0]))
			if !res.OK() {
				return &exitError{code: ExitError}
			}
			return nil
		},
	}
}
