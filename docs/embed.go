// Package docs embeds the project's user documentation so that programs can
// serve it: the MCP server's documentation tools search and read these pages.
// Every docs/*.md present at build time is included.
package docs

import "embed"

// FS holds docs/*.md.
//
//go:embed *.md
var FS embed.FS
