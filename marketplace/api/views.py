"""Hub endpoints: search and read without logging in; like and unlike with a read-write token or a session."""

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.permissions import PersonalTokenPermission, TokenScopePermission
from billing.quote import load_price_book
from core.api.pagination import LimitOffsetPagination

from ..hub import services
from .serializers import HubItemDetailSerializer, HubItemSerializer, HubLikeSerializer, HubSearchQuerySerializer


class HubPagination(LimitOffsetPagination):
    """``limit``/``offset`` pages whose ``count`` stops at ``services.RESULT_COUNT_CAP`` (``count_exact`` false):
    counting every match of a broad query would cost more than the page."""

    max_limit = 100

    def get_count(self, queryset):
        count, self.count_exact = services.count_matches(queryset)
        return count

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        response.data["count_exact"] = self.count_exact
        return response

    def get_paginated_response_schema(self, schema):
        schema = super().get_paginated_response_schema(schema)
        schema["properties"]["count_exact"] = {"type": "boolean"}
        return schema


class HubListView(APIView):
    # Public, and with a token the caller's private items too: a team's token is refused (it reaches nothing
    # personal), a read-only one only reads.
    permission_classes = [AllowAny, PersonalTokenPermission]
    pagination_class = HubPagination

    @extend_schema(
        tags=["hub"],
        parameters=[HubSearchQuerySerializer],
        responses={200: HubItemSerializer(many=True)},
        summary="Search models and datasets",
        description="Public items for everyone, plus the caller's own private ones. Chinese words (对话) and "
        "English words or repo prefixes (chatglm, THUDM/chat) both work.",
    )
    def get(self, request):
        query = HubSearchQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        items = services.search_items(request.user, query.hub_query(), query.validated_data["sort"])
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(items, request, view=self)
        data = HubItemSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)


class HubItemView(APIView):
    permission_classes = [AllowAny, PersonalTokenPermission]

    @extend_schema(tags=["hub"], responses={200: HubItemDetailSerializer}, summary="One model or dataset")
    def get(self, request, org, name):
        item = services.get_item(request.user, f"{org}/{name}")
        item.file_list = list(services.files_of(item))
        item.liked = services.liked_by(request.user, item)
        item.chip_prices = services.chip_prices(item, load_price_book(user=request.user))
        return Response(HubItemDetailSerializer(item, context={"request": request}).data)


class HubLikeView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]

    def _answer(self, item, liked):
        item = services.refresh_counts(item)
        return Response(HubLikeSerializer({"liked": liked, "likes_count": item.likes_count}).data)

    @extend_schema(tags=["hub"], request=None, responses={200: HubLikeSerializer}, summary="Like (idempotent)")
    def post(self, request, org, name):
        item = services.get_item(request.user, f"{org}/{name}")
        services.like(request.user, item)
        return self._answer(item, True)

    @extend_schema(tags=["hub"], request=None, responses={200: HubLikeSerializer}, summary="Unlike (idempotent)")
    def delete(self, request, org, name):
        item = services.get_item(request.user, f"{org}/{name}")
        services.unlike(request.user, item)
        return self._answer(item, False)
