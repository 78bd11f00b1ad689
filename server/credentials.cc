#include "server/credentials.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* x509) const { X509_free(x509); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// The reason of the last OpenSSL error, and clears the queue.
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

absl::Status FileError(absl::string_view what, const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(what, " '", path, "': ", why));
}

absl::StatusOr<BioPtr> OpenFile(absl::string_view what, const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (bio == nullptr) {
    ERR_clear_error();
    return FileError(what, path, "cannot be read");
  }
  return bio;
}

// The first certificate of a PEM file.
absl::StatusOr<X509Ptr> ReadCertificate(absl::string_view what, const std::string& path) {
  absl::StatusOr<BioPtr> bio = OpenFile(what, path);
  if (!bio.ok()) return bio.status();
  X509Ptr certificate(PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr));
  if (certificate == nullptr) {
    return FileError(what, path, absl::StrCat("no PEM certificate (", OpenSslError(), ")"));
  }
  return certificate;
}

absl::Status CheckServerIdentity(const TlsOptions& options) {
  absl::StatusOr<X509Ptr> certificate = ReadCertificate("--tls_cert", options.cert_path);
  if (!certificate.ok()) return certificate.status();
  absl::StatusOr<BioPtr> bio = OpenFile("--tls_key", options.key_path);
  if (!bio.ok()) return bio.status();
  KeyPtr key(PEM_read_bio_PrivateKey(bio->get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return FileError("--tls_key", options.key_path,
                     absl::StrCat("no unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(certificate->get(), key.get()) != 1) {
    ERR_clear_error();
    return FileError("--tls_key", options.key_path,
                     absl::StrCat("does not match the certificate in '", options.cert_path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTlsOptions(const TlsOptions& options) {
  if (options.cert_path.empty() != options.key_path.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!options.client_ca_path.empty() && !options.enabled()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca needs --tls_cert and --tls_key (mutual TLS is TLS first)");
  }
  if (options.reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("credentials reload interval must be at least 1 second, got ",
                     absl::FormatDuration(options.reload_interval)));
  }
  return absl::OkStatus();
}

absl::Status CheckTlsFiles(const TlsOptions& options) {
  if (!options.enabled()) return absl::OkStatus();
  if (absl::Status status = CheckServerIdentity(options); !status.ok()) return status;
  if (!options.client_ca_path.empty()) {
    absl::StatusOr<X509Ptr> ca = ReadCertificate("--tls_client_ca", options.client_ca_path);
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const TlsOptions& options) {
  if (absl::Status status = ValidateTlsOptions(options); !status.ok()) return status;
  if (!options.enabled()) return grpc::InsecureServerCredentials();
  if (absl::Status status = CheckTlsFiles(options); !status.ok()) return status;

  const auto interval_seconds =
      static_cast<unsigned int>(absl::ToInt64Seconds(options.reload_interval));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.key_path, options.cert_path, options.client_ca_path, interval_seconds);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (options.client_ca_path.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

}  // namespace partplan
