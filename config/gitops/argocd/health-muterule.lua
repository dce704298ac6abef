-- Argo CD health of a posture.dev MuteRule: the verdict kstatus gives it.
-- Key in argocd-cm: resource.customizations.health.posture.dev_MuteRule
-- A rule marking the stored findings is Progressing; an invalid rule (a bad
-- glob, an unknown severity, a match of nothing) or one in a namespace no
-- Tenant uses is Degraded. An expired rule is Healthy (it is as declared)
-- with the message "expired: ...": it mutes nothing any more.
-- Ready counts only for the generation it describes; Reconciling is
-- Progressing, Stalled is Degraded.
local hs = { status = "Progressing", message = "waiting for the Posture operator to reconcile it" }
if obj.status == nil or obj.status.observedGeneration == nil then
  return hs
end
if obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "waiting for the Posture operator to observe generation " .. obj.metadata.generation
  return hs
end
local ready = nil
local expired = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then
    return { status = "Degraded", message = c.message }
  end
  if c.type == "Reconciling" and c.status == "True" then
    hs.message = c.message
    return hs
  end
  if c.type == "Ready" and c.observedGeneration == obj.metadata.generation then
    ready = c
  end
  if c.type == "Expired" and c.status == "True" then
    expired = c
  end
end
if ready ~= nil and ready.status == "True" then
  if expired ~= nil then
    return { status = "Healthy", message = "expired: " .. (expired.message or expired.reason) }
  end
  return { status = "Healthy", message = ready.message }
end
if ready ~= nil then
  hs.message = ready.message
end
return hs
