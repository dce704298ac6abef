package ocsf

import "strings"

// OCSF's labels, as the rules check and record them.

// SeverityCaptions are OCSF's severity captions, lower-cased, in the order
// of their severity_id (0 to 6, then 99).
var SeverityCaptions = []string{"unknown", "informational", "low", "medium", "high", "critical", "fatal", "other"}

var severityLabel = map[int64]string{
	0: "unknown", 1: "informational", 2: "low", 3: "medium", 4: "high", 5: "critical", 6: "fatal", 99: "other",
}

// severityID is severityLabel read the other way.
var severityID = func() map[string]int64 {
	m := make(map[string]int64, len(severityLabel))
	for id, l := range severityLabel {
		m[l] = id
	}
	return m
}()

// Severity is a record's one severity: its caption and severity_id, which
// the store keeps, sorts, counts and answers as a pair. A label that is one
// of OCSF's captions (any case, surrounding space ignored) decides both,
// because scanners write the caption they mean and some number their own
// scale (Prowler's example reports label Critical with severity_id 1);
// otherwise the id decides. ok is false when neither is OCSF's, and then
// caption and id are the label lower-cased and the id as given.
func Severity(label string, id int64) (caption string, sid int64, ok bool) {
	l := strings.ToLower(strings.TrimSpace(label))
	if n, known := severityID[l]; known {
		return l, n, true
	}
	if c, known := severityLabel[id]; known {
		return c, id, true
	}
	return l, id, false
}

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
