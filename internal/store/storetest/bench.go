package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// BatchSize is the number of findings per WriteBatch in the benchmark: the
// ingestion worker's default (PostgreSQL asks it for 2,000).
const BatchSize = 1000

// BenchWriteBatch measures WriteBatch with batches of BatchSize findings of
// about 3 KB of raw JSON each, the size of a typical scanner record:
// "insert" writes new findings every batch, "upsert" rewrites the same ones
// (a re-ingested file). It reports rows/s.
func BenchWriteBatch(b *testing.B, s store.Store) {
	ctx := context.Background()
	if err := s.StartRun(ctx, "bench", "ing-bench", 1, 0); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, uidOf func(iter, i int) string) {
		var rawBytes int64
		batch := func(iter int) store.Batch {
			fs := make([]store.Finding, BatchSize)
			rawBytes = 0
			for i := range fs {
				fs[i] = benchFinding(uidOf(iter, i), i)
				rawBytes += int64(len(fs[i].Raw))
			}
			return store.Batch{Findings: fs, Scans: []store.Scan{{ID: "scan-bench", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}}}
		}
		bt := batch(0)
		b.SetBytes(rawBytes)
		b.ResetTimer()
		for iter := range b.N {
			// Building the batch is the worker's cost, not the store's.
			b.StopTimer()
			bt = batch(iter)
			b.StartTimer()
			if err := s.WriteBatch(ctx, "bench", "ing-bench", 1, bt); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N*BatchSize)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(rawBytes)/BatchSize, "raw-bytes/row")
	}
	b.Run("insert", func(b *testing.B) {
		run(b, func(iter, i int) string { return fmt.Sprintf("insert-%d-%d", iter, i) })
	})
	b.Run("upsert", func(b *testing.B) {
		run(b, func(_, i int) string { return fmt.Sprintf("upsert-%d", i) })
	})
}

var benchChecks = []string{"iam_root_mfa_enabled", "s3_bucket_public_access", "ec2_securitygroup_allow_ingress_from_internet_to_tcp_port_22", "cloudtrail_multi_region_enabled", "kms_cmk_rotation_enabled"}

// benchFinding builds a finding whose raw record has the shape and size of a
// Prowler OCSF Detection Finding.
func benchFinding(uid string, i int) store.Finding {
	check := benchChecks[i%len(benchChecks)]
	region := []string{"us-east-1", "eu-west-1", "ap-southeast-2"}[i%3]
	sev := []string{"informational", "low", "medium", "high", "critical"}[i%5]
	status := []string{"PASS", "FAIL", "MANUAL"}[i%3]
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	resource := fmt.Sprintf("arn:aws:s3:::posture-bench-bucket-%06d", i)
	raw := fmt.Appendf(nil, `{"message":"Bucket %[1]s does not have MFA delete enabled and may be exposed.","metadata":{"event_code":"%[2]s","product":{"name":"Prowler","uid":"prowler","vendor_name":"Prowler","version":"5.7.0"},"profiles":["cloud","datetime"],"tenant_uid":"","version":"1.4.0"},"severity_id":%[3]d,"severity":"%[4]s","status":"New","status_code":"%[5]s","status_detail":"Bucket %[1]s has Server Side Encryption disabled, Object Lock disabled and public access not blocked at account level.","status_id":1,"unmapped":{"related_url":"https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html","categories":["encryption","internet-exposed"],"depends_on":[],"related_to":[],"additional_urls":["https://hub.prowler.com/check/%[2]s"],"notes":"","compliance":{"CIS-2.0":["2.1.1"],"CIS-3.0":["2.1.1"],"ENS-RD2022":["mp.si.2.aws.s3.1"],"AWS-Foundational-Security-Best-Practices":["S3"],"NIST-800-53-Revision-5":["au_9_3","cm_6_a","cm_9_b","cp_9_d","sc_8_3","sc_8_4","sc_13_a","sc_28_1","si_19_4","ca_9_b"],"PCI-4.0":["3.5.1.1","3.5.1.2","8.3.2"],"SOC2":["cc_6_1"],"ISO27001-2022":["A.8.24"],"MITRE-ATTACK":["T1530"]},"scan_id":"scan-bench"},"activity_name":"Create","activity_id":1,"finding_info":{"created_time":%[6]d,"created_time_dt":"%[7]s","desc":"Check if S3 buckets have default encryption (SSE) enabled or use a bucket policy to enforce it, and whether they block public access at the account level.","product_uid":"prowler","title":"Check if S3 buckets have default encryption (SSE) enabled or use a bucket policy to enforce it.","types":["Data Protection"],"uid":"%[8]s"},"resources":[{"cloud_partition":"aws","region":"%[9]s","data":{"details":"","metadata":{"name":"posture-bench-bucket","arn":"%[1]s","region":"%[9]s","logging":false,"public_access_block":{"block_public_acls":false,"ignore_public_acls":false,"block_public_policy":false,"restrict_public_buckets":false},"encryption":null,"versioning":true,"mfa_delete":false,"tags":[{"Key":"team","Value":"platform"},{"Key":"env","Value":"prod"}]}},"group":{"name":"s3"},"labels":[],"name":"posture-bench-bucket","type":"AwsS3Bucket","uid":"%[1]s"}],"category_name":"Findings","category_uid":2,"class_name":"Detection Finding","class_uid":2004,"cloud":{"account":{"name":"production","type":"AWS Account","type_id":10,"uid":"123456789012","labels":["prod","payments"]},"org":{"name":"Example Org","uid":"o-abcdef1234"},"provider":"aws","region":"%[9]s"},"remediation":{"desc":"Ensure that S3 buckets have encryption at rest enabled and that public access is blocked at both the account and the bucket level.","references":["aws s3api put-bucket-encryption --bucket <bucket_name> --server-side-encryption-configuration '{\"Rules\": [{\"ApplyServerSideEncryptionByDefault\": {\"SSEAlgorithm\": \"AES256\"}}]}'","https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-bucket-encryption.html"]},"risk_details":"Amazon S3 default encryption provides a way to set the default encryption behavior for an S3 bucket. This will ensure data-at-rest is encrypted; without it, objects uploaded without explicit encryption headers are stored unencrypted.","time":%[6]d,"time_dt":"%[7]s","type_uid":200401,"type_name":"Detection Finding: Create"}`,
		resource, check, i%5+1, sev, status, ts.Unix(), ts.Format(time.RFC3339), uid, region)
	return store.Finding{
		UID: uid, ScanID: "scan-bench", CheckID: check,
		Title:    "Check if S3 buckets have default encryption (SSE) enabled or use a bucket policy to enforce it.",
		Severity: sev, SeverityID: i%5 + 1, StatusCode: status, Status: "New", Region: region,
		ProviderType: "aws", ProviderUID: "123456789012", ResourceUID: resource, Time: ts, Raw: raw,
	}
}
