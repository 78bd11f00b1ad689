// A server interceptor that answers INVALID_ARGUMENT to a unary call whose
// request does not parse.
//
// gRPC's callback API answers such a call itself, before any handler runs,
// with UNIMPLEMENTED and no message -- what a client also gets for a method
// the server does not have. A truncated or corrupt request is the caller's
// error, so this interceptor rewrites that status:
//
//   INVALID_ARGUMENT: the request does not parse as the request message of
//   /partplan.v1.PartitionPlanner/Validate (truncated, corrupt, or another
//   message)
//
//   builder.experimental().SetInterceptorCreators(...NewParseFailureInterceptorFactory()...);
#ifndef PARTPLAN_SERVER_PARSE_FAILURE_INTERCEPTOR_H_
#define PARTPLAN_SERVER_PARSE_FAILURE_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace partplan {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewParseFailureInterceptorFactory();

}  // namespace partplan

#endif  // PARTPLAN_SERVER_PARSE_FAILURE_INTERCEPTOR_H_
