package ocsf

// OCSF's labels, as the rules check and record them.

var severityLabel = map[int64]string{
	0: "unknown", 1: "informational", 2: "low", 3: "medium", 4: "high", 5: "critical", 6: "fatal", 99: "other",
}

// knownSeverity holds the labels of severityLabel.
var knownSeverity = func() map[string]bool {
	m := make(map[string]bool, len(severityLabel))
	for _, l := range severityLabel {
		m[l] = true
	}
	return m
}()

// className names common OCSF classes so a rejected upload says what it was.
var className = map[int64]string{
	1001: "File System Activity",
	1007: "Process Activity",
	2001: "Security Finding",
	2002: "Vulnerability Finding",
	2003: "Compliance Finding",
	2005: "Incident Finding",
	2006: "Data Security Finding",
	3001: "Account Change",
	3002: "Authentication",
	3003: "Authorize Session",
	4001: "Network Activity",
	4002: "HTTP Activity",
	4003: "DNS Activity",
	5001: "Device Inventory Info",
	6003: "API Activity",
}
