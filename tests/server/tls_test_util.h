// Certificates, secret volumes and TLS channels for the TLS and auth tests.
//
//   const std::string dir = FreshTestDir("tls");       // under $TEST_TMPDIR
//   ASSERT_TRUE(MakeCertificate("ca", dir, "ca").ok());
//   ASSERT_TRUE(MakeCertificate("server", dir, "server", "ca").ok());
//   SecretVolume volume(dir + "/secret");                // Kubernetes layout
//   ASSERT_TRUE(volume.Publish({{"tls.crt", ReadTestFile(dir + "/server.crt")}, ...}).ok());
//   auto channel = ConnectTls(port, TlsCredentials(ReadTestFile(dir + "/ca.crt")));
//   grpc::Status status = CallValidate(channel);
#ifndef PARTPLAN_TESTS_SERVER_TLS_TEST_UTIL_H_
#define PARTPLAN_TESTS_SERVER_TLS_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace partplan {

// A new empty directory $TEST_TMPDIR/<name>.
std::string FreshTestDir(const std::string& name);

// Runs tests/server/make_cert.sh: kind "ca" (self-signed), "server"
// (localhost and 127.0.0.1) or "client", signed by `ca`. Writes
// dir/name.key and dir/name.crt.
absl::Status MakeCertificate(const std::string& kind, const std::string& dir,
                             const std::string& name, const std::string& ca = "");

// The whole file; empty (and a test failure) when it cannot be read.
std::string ReadTestFile(const std::string& path);
absl::Status WriteTestFile(const std::string& path, const std::string& contents);

// A directory laid out like a Kubernetes secret volume: each file is a
// symlink through `..data`, which points at a versioned directory. Publish
// writes a new version and swaps `..data` atomically, as the kubelet does on
// rotation, so a reader never sees a new key with an old certificate.
class SecretVolume {
 public:
  explicit SecretVolume(std::string dir);
  absl::Status Publish(const std::map<std::string, std::string>& files);
  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  std::string dir_;
  int version_ = 0;
};

// TLS channel credentials trusting `ca_pem`, presenting the client identity
// when given (mTLS).
std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca_pem,
                                                         const std::string& cert_pem = "",
                                                         const std::string& key_pem = "");

// A channel to 127.0.0.1:port with its own connections (never shared with
// another channel), checking the server's certificate against "localhost".
std::shared_ptr<grpc::Channel> ConnectTls(int port,
                                          std::shared_ptr<grpc::ChannelCredentials> credentials);
std::shared_ptr<grpc::Channel> ConnectPlaintext(int port);

// One Validate call with an empty request (10 s deadline), sending
// `authorization: Bearer <token>` when token is not empty.
grpc::Status CallValidate(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& token = "");

// grpc.health.v1.Health/Check for `service`; the status of the call, and
// in `serving` whether the answer was SERVING.
grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         bool* serving);

// grpc.reflection.v1alpha ServerReflectionInfo with one list_services
// request; the status of the stream.
grpc::Status ListServicesByReflection(const std::shared_ptr<grpc::Channel>& channel,
                                      const std::string& token = "");

}  // namespace partplan

#endif  // PARTPLAN_TESTS_SERVER_TLS_TEST_UTIL_H_
