#include "server/planner_rpc.h"

#include <string>

#include "gtest/gtest.h"
#include "partplan/v1/planner_service.pb.h"

namespace partplan {
namespace {

// The table in planner_rpc.h matches the service in the .proto, in order.
TEST(PlannerRpcTest, MatchesTheServiceDescriptor) {
  const google::protobuf::ServiceDescriptor* service =
      v1::ValidateRequest::descriptor()->file()->FindServiceByName("PartitionPlanner");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), std::string(kPlannerServiceName));
  ASSERT_EQ(service->method_count(), static_cast<int>(kPlannerRpcCount));
  for (size_t i = 0; i < kPlannerRpcCount; ++i) {
    EXPECT_EQ(Index(kAllPlannerRpcs[i]), i);
    EXPECT_EQ(std::string(RpcName(kAllPlannerRpcs[i])),
              service->method(static_cast<int>(i))->name());
  }
}

}  // namespace
}  // namespace partplan
