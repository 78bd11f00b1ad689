// TLS and mutual TLS for partplan_server, with certificates re-read from
// disk while the server runs (Kubernetes rotates mounted secrets in place).
//
//   partplan::TlsOptions tls;
//   tls.cert_path = "/etc/partplan/tls/tls.crt";
//   tls.key_path = "/etc/partplan/tls/tls.key";
//   tls.client_ca_path = "/etc/partplan/tls/ca.crt";  // optional: mTLS
//   absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
//       partplan::NewServerCredentials(tls);   // insecure when TLS is off
//   builder.AddListeningPort(address, *credentials, &port);
//
// The files are checked once at startup (PEM parses, the key matches the
// certificate, the CA bundle holds a certificate), so a broken secret stops
// the server instead of failing every handshake. After that gRPC's
// FileWatcherCertificateProvider re-reads them every reload_interval; a
// rotated certificate or CA serves new connections without a restart, and a
// broken update is ignored by gRPC (it keeps the last good files).
#ifndef PARTPLAN_SERVER_CREDENTIALS_H_
#define PARTPLAN_SERVER_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace partplan {

struct TlsOptions {
  // PEM certificate chain and private key of the server; both or neither.
  std::string cert_path;
  std::string key_path;
  // PEM bundle of the CAs that sign client certificates. When set, every
  // client must present a certificate one of them signed (mutual TLS).
  std::string client_ca_path;
  // How often the three files are re-read; at least one second.
  absl::Duration reload_interval = absl::Seconds(60);

  bool enabled() const { return !cert_path.empty() || !key_path.empty(); }
};

// INVALID_ARGUMENT for a certificate without a key (or the reverse), a
// client CA without a server certificate, or a reload interval below one
// second.
absl::Status ValidateTlsOptions(const TlsOptions& options);

// Reads the files and checks them (see the top of this file).
// FAILED_PRECONDITION naming the file and the problem.
absl::Status CheckTlsFiles(const TlsOptions& options);

// Insecure credentials when TLS is off; otherwise TLS (and mTLS with a
// client CA) from watched files, after ValidateTlsOptions and CheckTlsFiles.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const TlsOptions& options);

}  // namespace partplan

#endif  // PARTPLAN_SERVER_CREDENTIALS_H_
