#include "server/parse_failure_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace partplan {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseFailureInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ParseFailureInterceptor(grpc::experimental::ServerRpcInfo* info)
      : unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY),
        method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // A unary call's one request message is null here only when it did not
    // deserialize (streams also see null at their end, so only unary calls).
    if (unary_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      parse_failed_ = true;
    }
    if (parse_failed_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request does not parse as the request message of ", method_,
                       " (truncated, corrupt, or another message)")));
    }
    methods->Proceed();
  }

 private:
  const bool unary_;
  const std::string method_;
  bool parse_failed_ = false;
};

class ParseFailureInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ParseFailureInterceptor(info);
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewParseFailureInterceptorFactory() {
  return std::make_unique<ParseFailureInterceptorFactory>();
}

}  // namespace partplan
