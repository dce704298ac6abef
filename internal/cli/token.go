package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/posture-dev/posture/internal/restapi"
)

func (a *app) tokenCommand() *cobra.Command {
	var out outputFlag
	var apiURL, email, tenant string
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Sign in with email and password and print a JWT (valid 30 minutes)",
		Long: `Exchanges a tenant user's email and password for a JWT through POST /api/v1/tokens and
prints the access token, so it can be used as POSTURE_TOKEN or by an MCP client
(Authorization: Bearer <token>). The password is read from stdin with --password-stdin,
else from ` + EnvPassword + `, else prompted for on a terminal; it is never accepted as a flag,
where it would end up in the shell history.`,
		Example: `  export POSTURE_TOKEN=$(postctl token --email admin@example.com)
  printf '%s\n' "$PASSWORD" | postctl token --email admin@example.com --password-stdin -o json`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if email == "" {
				return usageError{errors.New("--email is required")}
			}
			password, err := a.password(passwordStdin)
			if err != nil {
				return err
			}
			c, err := a.newAPIClient(apiURL, false)
			if err != nil {
				return err
			}
			var doc restapi.ResourceDocument[restapi.Token]
			body := restapi.NewRequest(restapi.TypeTokens, restapi.TokenRequest{Email: email, Password: password, Tenant: tenant})
			if _, err := c.do(cmd.Context(), "POST", restapi.PathTokens, nil, body, &doc); err != nil {
				return fmt.Errorf("signing in as %s: %w", email, err)
			}
			at := doc.Data.Attributes
			if at.Access == "" {
				return errors.New("the API answered without data.attributes.access")
			}
			if out.format == "json" {
				b, _ := json.MarshalIndent(map[string]string{"access": at.Access, "refresh": at.Refresh}, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
				return nil
			}
			fmt.Fprintln(a.stdout, at.Access)
			return nil
		},
	}
	out.register(cmd)
	cmd.Flags().Lookup("output").Usage = "output format: table (the access token alone) or json (access and refresh)"
	f := cmd.Flags()
	f.StringVar(&apiURL, "api-url", "", "API address (default: $"+EnvAPIURL+")")
	f.StringVar(&email, "email", "", "the user's email")
	f.StringVar(&tenant, "tenant", "", "the tenant, when the email belongs to users of several")
	f.BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of stdin")
	return cmd
}

func (a *app) password(fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
		if p := strings.TrimRight(line, "\r\n"); p != "" {
			return p, nil
		}
		return "", usageError{errors.New("--password-stdin: stdin held no password")}
	}
	if p := a.getenv(EnvPassword); p != "" {
		return p, nil
	}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.stderr, "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		if len(b) > 0 {
			return string(b), nil
		}
	}
	return "", usageError{fmt.Errorf("no password: use --password-stdin, set %s, or run on a terminal to be prompted", EnvPassword)}
}
