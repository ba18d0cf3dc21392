variable "secret" {
  type      = string
  sensitive = true
}
variable "generation" {
  type    = number
  default = 1
}
resource "terraform_data" "unchanged" {
  input = "steady"
}
resource "terraform_data" "updated" {
  input = "v${var.generation}"
}
resource "terraform_data" "removed" {
  count = var.generation == 1 ? 1 : 0
  input = "bye"
}
resource "terraform_data" "replaced" {
  input            = "r"
  triggers_replace = [var.generation]
}
resource "terraform_data" "replaced_cbd" {
  input            = "cbd"
  triggers_replace = [var.generation]
  lifecycle {
    create_before_destroy = true
  }
}
resource "terraform_data" "credentials" {
  count = var.generation == 1 ? 0 : 1
  input = {
    user     = "deploy"
    password = var.secret
    tags     = ["a", "b"]
  }
}
resource "terraform_data" "added" {
  count = var.generation == 1 ? 0 : 1
  input = { name = "new", ref = terraform_data.updated.output }
}
module "child" {
  source = "./child"
  label  = "gen-${var.generation}"
}
