package ocsf

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Problem codes. They are part of the API contract (error rows, docs).
const (
	CodeMissingField     = "missing_field"
	CodeInvalidType      = "invalid_type"
	CodeInvalidValue     = "invalid_value"
	CodeUnsupportedClass = "unsupported_class"
	CodeMissingAccount   = "missing_account"
	CodeDuplicateUID     = "duplicate_uid"
	CodeInvalidRecord    = "invalid_record"
)

// DetectionFindingClass is the only accepted OCSF class_uid.
const DetectionFindingClass = 2004

// MaxUIDLength bounds finding_info.uid in bytes; it is stored and indexed.
const MaxUIDLength = 1024

// MaxValueLength bounds Problem.Value in characters (runes).
const MaxValueLength = 100

// maxMillis is 9999-12-31T23:59:59.999Z: later times cannot be written as
// RFC 3339, which would break every JSON response that shows the finding.
const maxMillis = 253402300799999

// millisThreshold separates epoch seconds from epoch milliseconds: 1e11
// seconds is the year 5138, 1e11 milliseconds is 1973.
const millisThreshold = 1e11

// Problem is one reason a record is invalid.
type Problem struct {
	Code    string // one of the Code* constants
	Detail  string // human sentence naming the field, e.g. "finding_info.uid is required"
	Pointer string // JSON Pointer inside the record, e.g. "/finding_info/uid"; "" is the whole record
	Value   string // offending value as JSON text (strings keep their quotes), at most MaxValueLength characters; "" if missing
}

// Finding is the indexed summary of a valid record. Optional fields of the
// wrong type read as "", and NUL characters are dropped from the labels.
//
//	UID           finding_info.uid, exactly
//	CheckID       metadata.event_code
//	Title         finding_info.title
//	Severity      the caption of Severity(severity, severity_id): severity
//	              lower-cased when it is one of OCSF's captions (unknown,
//	              informational, low, medium, high, critical, fatal, other), else
//	              the caption of severity_id
//	StatusCode    status_code;  Status: status
//	Region        cloud.region, else the first non-empty resources[].region
//	ProviderType  cloud.provider, else unmapped.provider; trimmed, lower-cased
//	ProviderUID   cloud.account.uid, else unmapped.provider_uid; trimmed
//	AccountPointer where the account was read: /cloud/account/uid or /unmapped/provider_uid
//	AccountName   cloud.account.name
//	ResourceUID   the first non-empty resources[].uid
//	ScanID        unmapped.scan_id
//	SeverityID    the id of Severity(severity, severity_id): the caption's
//	              number when severity is a caption, else severity_id
//	Time          time, as epoch seconds, or milliseconds when above 1e11; UTC
type Finding struct {
	UID, CheckID, Title, Severity, StatusCode, Status, Region   string
	ProviderType, ProviderUID, AccountName, ResourceUID, ScanID string
	AccountPointer                                              string
	SeverityID                                                  int
	Time                                                        time.Time // UTC
}

// Validator checks the records of one file. It remembers the finding uids
// it has seen, as 16-byte hashes, so memory grows by about 20 bytes per
// distinct uid and never with record size. Not safe for concurrent use.
type Validator struct {
	seen map[[16]byte]int32
	dec  *jsontext.Decoder
	dups dupScan
}

// NewValidator returns a Validator with an empty uid set; use one per file.
func NewValidator() *Validator {
	return &Validator{
		seen: make(map[[16]byte]int32),
		dec:  jsontext.NewDecoder(bytes.NewReader(nil)),
	}
}

// Check validates one record. When problems is empty the record is valid and
// the Finding is complete; otherwise the Finding holds whatever could be read.
// Every problem of the record is reported, except that a record of another
// OCSF class gets only unsupported_class, since the remaining rules describe
// Detection Findings. The first record carrying a finding uid claims it, valid
// or not, so the order of records decides which one is the duplicate.
func (v *Validator) Check(rec Record) (Finding, []Problem) {
	var f fields
	var root jval
	if err := v.parse(rec, &f, &root); err != nil {
		if errors.Is(err, errNotObject) {
			return Finding{}, []Problem{{
				Code:   CodeInvalidRecord,
				Detail: "record must be a JSON object, found " + kindName(root.kind),
				Value:  root.display(),
			}}
		}
		return Finding{}, []Problem{{
			Code:   CodeInvalidRecord,
			Detail: "record is not valid JSON: " + err.Error(),
			Value:  truncate(strings.ToValidUTF8(string(rec.Raw[:min(len(rec.Raw), 4*MaxValueLength)]), "\uFFFD"), MaxValueLength),
		}}
	}

	// The fields above were read last-name-wins; a record that names a
	// member twice has no single reading, so nothing else is said about it.
	if ptr, dup := v.dups.find(rec.Raw); dup {
		return Finding{}, []Problem{{
			Code:    CodeDuplicateKey,
			Detail:  fmt.Sprintf("the member %s appears more than once in its object; each name may appear once", ptr),
			Pointer: ptr,
		}}
	}

	var c checker
	var out Finding

	if cls, ok := c.integer(f.classUID, "class_uid", "/class_uid"); ok && cls != DetectionFindingClass {
		detail := fmt.Sprintf("class_uid %d is not supported; only Detection Finding (2004) is accepted", cls)
		if name, known := className[cls]; known {
			detail = fmt.Sprintf("class_uid %d (%s) is not supported; only Detection Finding (2004) is accepted", cls, name)
		}
		// The error row still names the record by its uid, when it has a
		// usable one; the uid is not claimed, since the record is not a
		// Detection Finding.
		var other Finding
		if uid := f.fi.uid.text(); strings.TrimSpace(uid) != "" && strings.IndexByte(uid, 0) < 0 && len(uid) <= MaxUIDLength {
			other.UID = uid
		}
		return other, []Problem{{Code: CodeUnsupportedClass, Detail: detail, Pointer: "/class_uid", Value: f.classUID.display()}}
	}
	c.integer(f.activityID, "activity_id", "/activity_id")
	c.integer(f.categoryUID, "category_uid", "/category_uid")
	c.integer(f.typeUID, "type_uid", "/type_uid")

	if t, ok := c.integer(f.time, "time", "/time"); ok {
		switch {
		case t < 0:
			c.add(CodeInvalidValue, "/time", f.time.display(), "time must not be negative")
		case t > maxMillis:
			c.add(CodeInvalidValue, "/time", f.time.display(), "time is out of range (after the year 9999)")
		case t > millisThreshold:
			out.Time = time.UnixMilli(t).UTC()
		default:
			out.Time = time.Unix(t, 0).UTC()
		}
	}

	if sev, ok := c.integer(f.severityID, "severity_id", "/severity_id"); ok {
		if _, known := severityLabel[sev]; known {
			// A caption that disagrees with the id is accepted, not refused:
			// Severity settles the pair, and the raw record keeps both.
			caption, id, _ := Severity(f.severity.text(), sev)
			out.Severity, out.SeverityID = caption, int(id)
		} else {
			c.add(CodeInvalidValue, "/severity_id", f.severityID.display(),
				"severity_id must be 0 to 6 or 99, found %d", sev)
		}
	}

	switch {
	case f.metadata.missing():
		c.add(CodeMissingField, "/metadata/version", nullText(f.metadata), "metadata.version is required")
		c.add(CodeMissingField, "/metadata/product", nullText(f.metadata), "metadata.product (with a name or uid) is required")
	case f.metadata.kind != '{':
		c.add(CodeInvalidType, "/metadata", f.metadata.display(), "metadata must be an object, found %s", kindName(f.metadata.kind))
	default:
		if s, ok := c.str(f.md.version, "metadata.version", "/metadata/version"); ok && strings.TrimSpace(s) == "" {
			c.add(CodeInvalidValue, "/metadata/version", f.md.version.display(), "metadata.version must not be empty")
		}
		c.product(&f)
		out.CheckID = noNUL(f.md.eventCode.text())
	}

	uidOK := false
	switch {
	case f.findingInfo.missing():
		c.add(CodeMissingField, "/finding_info/uid", nullText(f.findingInfo), "finding_info.uid is required")
	case f.findingInfo.kind != '{':
		c.add(CodeInvalidType, "/finding_info", f.findingInfo.display(), "finding_info must be an object, found %s", kindName(f.findingInfo.kind))
	default:
		if s, ok := c.str(f.fi.uid, "finding_info.uid", "/finding_info/uid"); ok {
			switch {
			case strings.TrimSpace(s) == "":
				c.add(CodeInvalidValue, "/finding_info/uid", f.fi.uid.display(), "finding_info.uid must not be empty")
			case strings.IndexByte(s, 0) >= 0:
				c.add(CodeInvalidValue, "/finding_info/uid", f.fi.uid.display(), "finding_info.uid must not contain NUL (\\u0000) characters")
			case len(s) > MaxUIDLength:
				c.add(CodeInvalidValue, "/finding_info/uid", f.fi.uid.display(),
					"finding_info.uid is %d bytes long; at most %d are allowed", len(s), MaxUIDLength)
			default:
				uidOK = true
				out.UID = s
			}
		}
		out.Title = noNUL(f.fi.title.text())
	}

	if p, id, ok := account(f.cl.provider, f.cl.accountUID); ok {
		out.ProviderType, out.ProviderUID, out.AccountPointer = p, id, "/cloud/account/uid"
	} else if p, id, ok := account(f.um.provider, f.um.providerUID); ok {
		out.ProviderType, out.ProviderUID, out.AccountPointer = p, id, "/unmapped/provider_uid"
	} else {
		c.add(CodeMissingAccount, "/cloud/account/uid", f.cl.accountUID.display(),
			"no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")
	}
	out.AccountName = noNUL(f.cl.accountName.text())

	if uidOK {
		sum := sha256.Sum256([]byte(out.UID))
		key := [16]byte(sum[:16])
		if first, dup := v.seen[key]; dup {
			c.add(CodeDuplicateUID, "/finding_info/uid", f.fi.uid.display(),
				"finding_info.uid is already used by record %d earlier in the file", first)
		} else {
			v.seen[key] = int32(min(rec.Index, math.MaxInt32))
		}
	}

	out.StatusCode = noNUL(f.statusCode.text())
	out.Status = noNUL(f.status.text())
	if out.Region = noNUL(f.cl.region.text()); out.Region == "" {
		out.Region = noNUL(f.resRegion)
	}
	out.ResourceUID = noNUL(f.resUID)
	out.ScanID = noNUL(f.um.scanID.text())
	return out, c.ps
}

// account returns a billable provider type and account id, if both are
// usable: non-empty strings, and free of NUL, which no SQL text column takes.
func account(provider, id jval) (string, string, bool) {
	p, u := strings.TrimSpace(provider.text()), strings.TrimSpace(id.text())
	if p == "" || u == "" || strings.IndexByte(p, 0) >= 0 || strings.IndexByte(u, 0) >= 0 {
		return "", "", false
	}
	return ProviderType(p), u, true
}

var notProviderTypeChars = regexp.MustCompile(`[^a-z0-9]`)

// ProviderType is a scanner's provider name as findings, scans and
// Providers (spec.type, [a-z0-9]+) all record it: lower-cased, other
// characters dropped ("unknown" when none is left), so that
// filter[provider_type] names the findings of a Provider's type.
func ProviderType(name string) string {
	v := notProviderTypeChars.ReplaceAllString(strings.ToLower(name), "")
	if v == "" {
		return "unknown"
	}
	return v
}

// noNUL drops NUL characters from descriptive fields: JSON allows \u0000
// but PostgreSQL text columns refuse it, and these fields are only labels.
func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
}

// product checks metadata.product: an object with a non-empty name or uid.
func (c *checker) product(f *fields) {
	p := &f.md
	switch {
	case p.product.missing():
		c.add(CodeMissingField, "/metadata/product", nullText(p.product), "metadata.product (with a name or uid) is required")
		return
	case p.product.kind != '{':
		c.add(CodeInvalidType, "/metadata/product", p.product.display(), "metadata.product must be an object, found %s", kindName(p.product.kind))
		return
	}
	if strings.TrimSpace(p.prodName.text()) != "" || strings.TrimSpace(p.prodUID.text()) != "" {
		return
	}
	wrong := false
	for _, x := range []struct {
		v          jval
		name, path string
	}{{p.prodName, "metadata.product.name", "/metadata/product/name"}, {p.prodUID, "metadata.product.uid", "/metadata/product/uid"}} {
		if !x.v.missing() && !x.v.isStr() {
			c.add(CodeInvalidType, x.path, x.v.display(), "%s must be a string, found %s", x.name, kindName(x.v.kind))
			wrong = true
		}
	}
	switch {
	case wrong:
	case p.prodName.isStr():
		c.add(CodeInvalidValue, "/metadata/product/name", p.prodName.display(), "metadata.product needs a non-empty name or uid")
	case p.prodUID.isStr():
		c.add(CodeInvalidValue, "/metadata/product/uid", p.prodUID.display(), "metadata.product needs a non-empty name or uid")
	default:
		c.add(CodeMissingField, "/metadata/product/name", "", "metadata.product.name or metadata.product.uid is required")
	}
}

// nullText is the Value of a missing field: "" when absent, "null" when null.
func nullText(j jval) string {
	if j.set {
		return "null"
	}
	return ""
}

type checker struct{ ps []Problem }

func (c *checker) add(code, ptr, value, format string, args ...any) {
	c.ps = append(c.ps, Problem{Code: code, Detail: fmt.Sprintf(format, args...), Pointer: ptr, Value: value})
}

// integer requires an integral JSON number. 2004.0 and 1.7e9 count: some
// producers print every number as a float, and the value is what matters.
func (c *checker) integer(j jval, name, ptr string) (int64, bool) {
	switch {
	case !j.set:
		c.add(CodeMissingField, ptr, "", "%s is required", name)
		return 0, false
	case j.kind == 'n':
		c.add(CodeMissingField, ptr, "null", "%s is required but is null", name)
		return 0, false
	case j.kind != '0':
		c.add(CodeInvalidType, ptr, j.display(), "%s must be an integer, found %s", name, kindName(j.kind))
		return 0, false
	}
	if !strings.ContainsAny(j.str, ".eE") {
		n, err := strconv.ParseInt(j.str, 10, 64)
		if err != nil {
			c.add(CodeInvalidValue, ptr, j.display(), "%s is out of range", name)
			return 0, false
		}
		return n, true
	}
	f, err := strconv.ParseFloat(j.str, 64)
	switch {
	case err != nil || math.Abs(f) >= 1<<63:
		if f == math.Trunc(f) {
			c.add(CodeInvalidValue, ptr, j.display(), "%s is out of range", name)
		} else {
			c.add(CodeInvalidType, ptr, j.display(), "%s must be an integer, found a fractional number", name)
		}
		return 0, false
	case f != math.Trunc(f):
		c.add(CodeInvalidType, ptr, j.display(), "%s must be an integer, found a fractional number", name)
		return 0, false
	}
	return int64(f), true
}

func (c *checker) str(j jval, name, ptr string) (string, bool) {
	switch {
	case !j.set:
		c.add(CodeMissingField, ptr, "", "%s is required", name)
		return "", false
	case j.kind == 'n':
		c.add(CodeMissingField, ptr, "null", "%s is required but is null", name)
		return "", false
	case j.kind != '"':
		c.add(CodeInvalidType, ptr, j.display(), "%s must be a string, found %s", name, kindName(j.kind))
		return "", false
	}
	return j.str, true
}
